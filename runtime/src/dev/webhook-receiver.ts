import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { LocalCertificate } from './local-certificate.js';

/** One request a receiver got. */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** performance.now() when it arrived. */
  at: number;
}

/** What a path answers: a status (and body, headers), after `afterMs` if given (a slow receiver), or nothing at all (`hang`). */
export type Reply = { status: number; body?: string; headers?: Record<string, string>; afterMs?: number } | 'hang';

/**
 * A local HTTPS webhook receiver as a user would run one, with a reply chosen per path and per
 * request (flapping, slow, gone, redirecting…). It records everything it was sent.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  private readonly replies = new Map<string, (request: Received, count: number) => Reply>();
  private readonly counts = new Map<string, number>();
  private readonly delayed = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly server: https.Server,
    private readonly inspect: ((request: Received) => void) | undefined,
  ) {}

  /** `inspect` sees every request as it arrives (the tests check each delivery against the event catalog). */
  static async start(certificate: LocalCertificate, inspect?: (request: Received) => void): Promise<WebhookReceiver> {
    let receiver!: WebhookReceiver;
    const server = https.createServer({ key: certificate.key, cert: certificate.cert }, (req, res) => receiver.handle(req, res));
    receiver = new WebhookReceiver(server, inspect);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The URL of `path` on this receiver (by name: the certificate is for localhost). */
  url(path: string): string {
    return `https://localhost:${this.port}${path}`;
  }

  /** How `path` answers from now on (default 200 "ok"). */
  reply(path: string, decide: (request: Received, count: number) => Reply): void {
    this.replies.set(path, decide);
  }

  at(path: string): Received[] {
    return this.received.filter((request) => request.path === path);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      const request: Received = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: performance.now() };
      this.received.push(request);
      this.inspect?.(request);
      const count = (this.counts.get(path) ?? 0) + 1;
      this.counts.set(path, count);
      const reply = this.replies.get(path)?.(request, count) ?? { status: 200, body: 'ok' };
      if (reply === 'hang') return;
      const answer = () => {
        res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
        res.end(reply.body ?? '');
      };
      if (!reply.afterMs) return answer();
      const timer = setTimeout(() => {
        this.delayed.delete(timer);
        answer();
      }, reply.afterMs);
      this.delayed.add(timer);
    });
  }

  async close(): Promise<void> {
    for (const timer of this.delayed) clearTimeout(timer);
    this.delayed.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
