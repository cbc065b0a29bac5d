import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small OpenAI-compatible upstream for tests and benchmarks (no network): `POST
 * /v1/chat/completions`, answered at once or as a stream of server-sent events, with usage.
 * The answer is `words` tokens ("w1 w2 …", at most `max_tokens`); the prompt counts one token
 * per 4 characters of message text. Each model can be told to fail, hang, stream slowly, or break
 * a stream off.
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
  | { kind: 'break'; tokens: number };

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
      void this.answer(body, model, mode.kind === 'slow' ? mode.delayMs : 0, res, mode.kind === 'break' ? mode.tokens : undefined);
    });
  }

  private async answer(body: Record<string, unknown>, model: string, delayMs: number, res: http.ServerResponse, breakAfter?: number): Promise<void> {
    const messages = Array.isArray(body.messages) ? (body.messages as Array<{ content?: unknown }>) : [];
    const promptTokens = Math.ceil(messages.reduce((sum, message) => sum + (typeof message.content === 'string' ? message.content.length : 0), 0) / 4);
    const limit = typeof body.max_tokens === 'number' ? body.max_tokens : Number.POSITIVE_INFINITY;
    const tokens = Array.from({ length: Math.min(this.words, limit) }, (_, i) => `w${i + 1}`);
    const id = `chatcmpl-${Math.random().toString(36).slice(2)}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: promptTokens, completion_tokens: tokens.length, total_tokens: promptTokens + tokens.length };
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: tokens.join(' ') }, finish_reason: 'stop' }],
          usage,
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    send(chunk({ role: 'assistant', content: '' }, null));
    for (const [i, token] of tokens.entries()) {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (res.destroyed) return;
      if (i === breakAfter) {
        // What was written goes out first; then the connection closes without the stream's end.
        res.socket?.end();
        return;
      }
      send(chunk({ content: i === 0 ? token : ` ${token}` }, null));
    }
    send(chunk({}, 'stop'));
    if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage)
      send({ id, object: 'chat.completion.chunk', created, model, choices: [], usage });
    res.end('data: [DONE]\n\n');
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
