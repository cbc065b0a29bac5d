import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatAnswer, completionBody, streamEvents } from '../chat-answer.js';

/**
 * A small OpenAI-compatible upstream for tests and benchmarks (no network): `POST
 * /v1/chat/completions`, answered at once or as a stream of server-sent events, with usage.
 * The answer is `words` tokens ("w1 w2 …", shaped by runtime/src/chat-answer.ts, as the data
 * plane's demo upstream's). Each model can be told to fail, hang, stream slowly, or break a stream off.
 */

export type UpstreamMode =
  /** Answers normally. */
  | { kind: 'ok' }
  /** Answers `status` with an error body before any byte of an answer. */
  | { kind: 'fail'; status: number }
  /** Never answers. */
  | { kind: 'hang' }
  /** Streams with `delayMs` between tokens. */
  | { kind: 'slow'; delayMs: number }
  /** Streams `tokens` tokens, then drops the connection (a provider failing mid-stream). */
  | { kind: 'break'; tokens: number }
  /** Streams without the usage chunk, whatever `stream_options` asks, and with `[DONE]` or not; the response then ends cleanly. */
  | { kind: 'no-usage'; done: boolean };

export interface UpstreamRequest {
  model: string;
  authorization: string | undefined;
  body: Record<string, unknown>;
}

export class OpenAiUpstream {
  readonly requests: UpstreamRequest[] = [];
  private readonly modes = new Map<string, UpstreamMode>();
  /** Tokens in an answer (before max_tokens). */
  words = 8;

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<OpenAiUpstream> {
    let upstream!: OpenAiUpstream;
    const server = http.createServer((req, res) => upstream.handle(req, res));
    upstream = new OpenAiUpstream(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return upstream;
  }

  /** The base URL for the model catalog (`…/v1`). */
  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  mode(model: string, mode: UpstreamMode): void {
    this.modes.set(model, mode);
  }

  /** How many calls went to `model`. */
  callsTo(model: string): number {
    return this.requests.filter((request) => request.model === model).length;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      const model = String(body.model);
      this.requests.push({ model, authorization: req.headers.authorization, body });
      const mode = this.modes.get(model) ?? { kind: 'ok' };
      if (mode.kind === 'hang') return;
      if (mode.kind === 'fail') {
        res
          .writeHead(mode.status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: 'upstream failure', type: 'server_error' } }));
        return;
      }
      void this.answer(
        body,
        mode.kind === 'slow' ? mode.delayMs : 0,
        res,
        mode.kind === 'break' ? mode.tokens : undefined,
        mode.kind === 'no-usage' ? mode : undefined,
      );
    });
  }

  private async answer(
    body: Record<string, unknown>,
    delayMs: number,
    res: http.ServerResponse,
    breakAfter?: number,
    noUsage?: { done: boolean },
  ): Promise<void> {
    const answer = chatAnswer(
      body,
      Array.from({ length: this.words }, (_, i) => `w${i + 1}`),
    );
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completionBody(answer)));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // The events after the first (the role) are the tokens: a slow upstream waits before each.
    let events = [...streamEvents(answer, noUsage ? { ...body, stream_options: undefined } : body)];
    if (noUsage && !noUsage.done) events = events.filter((data) => data !== '[DONE]');
    for (const [i, data] of events.entries()) {
      if (delayMs > 0 && i >= 1 && i <= answer.tokens.length) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (res.destroyed) return;
      if (breakAfter !== undefined && i === breakAfter + 1) {
        // What was written goes out first; then the connection closes without the stream's end.
        res.socket?.end();
        return;
      }
      res.write(`data: ${data}\n\n`);
    }
    res.end();
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
