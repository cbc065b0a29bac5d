import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  APIConnectionError,
  APITimeoutError,
  createSwitchboardClient,
  RateLimitError,
  ServiceUnavailableError,
  type SwitchboardClientOptions,
} from '../src/index.js';

/**
 * Retries, backoff, idempotency keys and timeouts against a local HTTP server that answers what
 * each test scripts (503, 429, a dropped connection, silence). The waits between attempts go
 * through an injected sleep that records them and returns at once, so nothing waits for a clock.
 */

interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  body: string;
}
type Answer = (req: IncomingMessage, res: ServerResponse) => void;

let server: Server;
let baseUrl: string;
let script: Answer[] = [];
let seen: Seen[] = [];

const reply =
  (status: number, body: unknown = {}, headers: Record<string, string> = {}): Answer =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req_${seen.length}`, ...headers }).end(JSON.stringify(body));
  };
const errorBody = (code: string) => ({ error: { code, message: code, field: null, request_id: 'req_x' } });
const unavailable = (headers: Record<string, string> = {}) => reply(503, errorBody('service_unavailable'), headers);
const limited = (seconds: number) => reply(429, errorBody('rate_limited'), { 'retry-after': String(seconds) });
/** Reads the request, then closes the connection without an answer. */
const drop: Answer = (req) => req.socket.destroy();
/** Never answers (the client's timeout ends it). */
const silence: Answer = () => {};

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', idempotencyKey: req.headers['idempotency-key'] as string | undefined, body });
      const answer = script.shift() ?? reply(200, { ok: true });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  script = [];
  seen = [];
});

/** A client whose waits are recorded instead of slept; random() is fixed, so every backoff is known. */
function client(options: Partial<SwitchboardClientOptions> = {}) {
  const waits: number[] = [];
  const sb = createSwitchboardClient({
    baseUrl,
    apiKey: 'sb_test',
    backoff: {
      sleep: async (ms) => {
        waits.push(ms);
      },
      random: () => 0.5,
    },
    ...options,
  });
  return { sb, waits };
}

describe('retries', () => {
  it('retries a 503 with backoff and answers the success', async () => {
    script = [unavailable(), unavailable(), reply(200, { balance_usd: '1.00', currency: 'USD', updated_at: '2026-01-01T00:00:00Z' })];
    const { sb, waits } = client();
    expect(await sb.billing.balance()).toMatchObject({ balance_usd: '1.00' });
    expect(seen.map((s) => s.path)).toEqual(['/v1/billing/balance', '/v1/billing/balance', '/v1/billing/balance']);
    // Exponential from 500 ms, half fixed and half jitter (random 0.5): 375 ms, then 750 ms.
    expect(waits).toEqual([375, 750]);
  });

  it('honours Retry-After on a 429 and on a 503', async () => {
    script = [limited(3), unavailable({ 'retry-after': '1' }), reply(200, { data: [], has_more: false, next_cursor: null })];
    const { sb, waits } = client();
    expect(await sb.keys.list().collect()).toEqual([]);
    expect(waits).toEqual([3000, 1000]);
  });

  it('reads a Retry-After that is an HTTP date', async () => {
    // An HTTP date has whole seconds: the wait is what is left of them, at most the 2 s given.
    script = [reply(429, errorBody('rate_limited'), { 'retry-after': new Date(Date.now() + 2000).toUTCString() }), reply(200, {})];
    const { sb, waits } = client();
    await sb.account.retrieve();
    expect(waits).toHaveLength(1);
    expect([1000, 2000]).toContain(waits[0]);
  });

  it('gives up after its budget and throws the last answer as its class', async () => {
    script = [unavailable({ 'retry-after': '2' }), unavailable({ 'retry-after': '2' }), unavailable({ 'retry-after': '2' }), unavailable()];
    const { sb, waits } = client();
    const error = await sb.account.retrieve().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ServiceUnavailableError);
    expect(error).toMatchObject({ status: 503, code: 'service_unavailable', retryAfter: 2, requestId: 'req_x' });
    // maxRetries 2 by default: three attempts, two waits.
    expect(seen).toHaveLength(3);
    expect(waits).toEqual([2000, 2000]);
  });

  it('takes the budget of the client and of the call, and caps the backoff', async () => {
    script = Array.from({ length: 10 }, () => unavailable());
    const { sb, waits } = client({
      maxRetries: 5,
      backoff: { initialDelayMs: 100, maxDelayMs: 1000, random: () => 1, sleep: async (ms) => void waits.push(ms) },
    });
    await expect(sb.account.retrieve()).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(waits).toEqual([100, 200, 400, 800, 1000]);
    expect(seen).toHaveLength(6);

    script = [limited(1)];
    seen = [];
    await expect(sb.account.retrieve({ maxRetries: 0 })).rejects.toBeInstanceOf(RateLimitError);
    expect(seen).toHaveLength(1);
  });

  it('does not wait for a Retry-After longer than a minute: the caller decides', async () => {
    script = [limited(900)];
    const { sb, waits } = client();
    const error = await sb.auth.login({ email: 'a@example.com', password: 'x' }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ retryAfter: 900 });
    expect(waits).toEqual([]);
    expect(seen).toHaveLength(1);
  });

  it('does not retry other errors', async () => {
    script = [reply(500, errorBody('internal_error')), reply(409, errorBody('key_revoked'))];
    const { sb } = client();
    await expect(sb.account.retrieve()).rejects.toMatchObject({ status: 500 });
    await expect(sb.keys.update('key_1', { name: 'x' })).rejects.toMatchObject({ status: 409, code: 'key_revoked' });
    expect(seen).toHaveLength(2);
  });
});

describe('idempotency keys', () => {
  it('gives each POST its own key, the same on every attempt, and sends the body again', async () => {
    script = [unavailable(), drop, reply(201, { full_key: 'sb_x', key: { key_id: 'key_1' } })];
    const { sb, waits } = client();
    const created = await sb.keys.create({ name: 'backend' });
    expect(created.key?.key_id).toBe('key_1');
    expect(seen).toHaveLength(3);
    const keys = new Set(seen.map((s) => s.idempotencyKey));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(seen.map((s) => JSON.parse(s.body))).toEqual([{ name: 'backend' }, { name: 'backend' }, { name: 'backend' }]);
    expect(waits).toHaveLength(2);

    script = [reply(201, {})];
    await sb.keys.create({ name: 'another' });
    expect(seen[3].idempotencyKey).not.toBe(seen[0].idempotencyKey);
  });

  it('sends the caller’s key when given, and none on other methods', async () => {
    const { sb } = client();
    await sb.conversations.create({ title: 't' }, { idempotencyKey: 'order-42' });
    await sb.post('/v1/organizations', { body: { name: 'Acme' }, idempotencyKey: 'org-1' });
    await sb.keys.update('key_1', { name: 'n' });
    await sb.keys.revoke('key_1');
    expect(seen.map((s) => [s.method, s.idempotencyKey])).toEqual([
      ['POST', 'order-42'],
      ['POST', 'org-1'],
      ['PATCH', undefined],
      ['DELETE', undefined],
    ]);
  });

  it('gives a top-up’s body the call’s key unless the caller names one', async () => {
    const { sb } = client();
    await sb.billing.topup({ amount_usd: '5.00' });
    await sb.billing.topup({ amount_usd: '5.00', idempotency_key: 'order-7' });
    await sb.billing.topup({ amount_usd: '5' }, { idempotencyKey: 'order-8' });
    const [first, second, third] = seen;
    expect(JSON.parse(first.body)).toEqual({ amount_usd: '5.00', idempotency_key: first.idempotencyKey });
    expect(JSON.parse(second.body).idempotency_key).toBe('order-7');
    expect(second.idempotencyKey).not.toBe('order-7');
    expect([third.idempotencyKey, JSON.parse(third.body).idempotency_key]).toEqual(['order-8', 'order-8']);
  });
});

describe('connection failures and timeouts', () => {
  it('retries a GET after a dropped connection, and throws APIConnectionError once the budget is spent', async () => {
    script = [drop, reply(200, { user_id: 'usr_1' })];
    const { sb } = client();
    expect(await sb.account.retrieve()).toEqual({ user_id: 'usr_1' });

    script = [drop, drop, drop];
    seen = [];
    const error = await sb.account.retrieve().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(APIConnectionError);
    expect(error).toMatchObject({ status: 0, code: 'connection_error' });
    expect((error as Error).cause).toBeInstanceOf(Error);
    expect(seen).toHaveLength(3);
  });

  it('times out an attempt that gets no answer, and retries it', async () => {
    script = [silence, reply(200, { user_id: 'usr_1' })];
    const { sb } = client({ timeout: 100 });
    expect(await sb.account.retrieve()).toEqual({ user_id: 'usr_1' });
    expect(seen).toHaveLength(2);

    script = [silence];
    seen = [];
    const error = await sb.account.retrieve({ timeout: 50, maxRetries: 0 }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(APITimeoutError);
    expect(error).toMatchObject({ code: 'timeout', status: 0 });
  });

  it('stops when the caller aborts, also between attempts', async () => {
    const controller = new AbortController();
    script = [unavailable()];
    const sb = createSwitchboardClient({
      baseUrl,
      backoff: {
        sleep: async (_ms, signal) => {
          controller.abort(new Error('stop'));
          signal?.throwIfAborted();
        },
      },
    });
    await expect(sb.account.retrieve({ signal: controller.signal })).rejects.toThrow('stop');
    expect(seen).toHaveLength(1);
  });
});

describe('the front door', () => {
  const params = { model: 'service/fast', messages: [{ role: 'user' as const, content: 'hi' }] };
  const completion = { id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [], service: { generation_id: 'gen_1' } };

  it('retries a 429 and a 503 of a completion, which come before anything goes upstream', async () => {
    script = [limited(2), unavailable(), reply(200, completion)];
    const { sb, waits } = client();
    const answer = await sb.chat.completions.create(params);
    expect(answer.service.generation_id).toBe('gen_1');
    expect(waits).toEqual([2000, 750]);
    expect(seen.every((s) => s.idempotencyKey === undefined)).toBe(true);
  });

  it('never sends a completion again after a dropped connection: it would be billed twice', async () => {
    script = [drop];
    const { sb } = client();
    await expect(sb.chat.completions.create(params)).rejects.toBeInstanceOf(APIConnectionError);
    expect(seen).toHaveLength(1);
  });

  it('streams chunks until [DONE], and throws an error event', async () => {
    const chunk = (content: string) => ({
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    });
    script = [
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-service-generation-id': 'gen_2' });
        res.write(`data: ${JSON.stringify(chunk('Hel'))}\n\n`);
        res.write(
          `data: ${JSON.stringify(chunk('lo'))}\r\n\r\ndata: ${JSON.stringify({ ...chunk(''), choices: [], service: { generation_id: 'gen_2' } })}\n\n`,
        );
        res.end('data: [DONE]\n\n');
      },
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`data: ${JSON.stringify(chunk('Hel'))}\n\n`);
        res.end(`data: ${JSON.stringify({ error: { code: 'stream_too_long', message: 'cut', type: 'api_error', param: null } })}\n\n`);
      },
    ];
    const { sb } = client();
    const stream = await sb.chat.completions.create({ ...params, stream: true });
    expect(stream.response.headers.get('x-service-generation-id')).toBe('gen_2');
    const parts: string[] = [];
    let service: unknown;
    for await (const event of stream) {
      parts.push(...event.choices.map((choice) => String(choice.delta.content)));
      service ??= event.service;
    }
    expect(parts.join('')).toBe('Hello');
    expect(service).toEqual({ generation_id: 'gen_2' });
    expect(JSON.parse(seen[0].body)).toMatchObject({ stream: true });

    const cut = await sb.chat.completions.create({ ...params, stream: true });
    const read = async () => {
      for await (const _ of cut);
    };
    await expect(read()).rejects.toMatchObject({ status: 502, code: 'stream_too_long' });
  });
});
