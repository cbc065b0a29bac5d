import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { lastUserMessage, parseChatRequest, promptTokenBound, textOf } from '@switchboard/data-plane/chat-request';
import { readDataPlaneConfig } from '@switchboard/data-plane/config';
import { demoUpstream } from '@switchboard/data-plane/demo-upstream';
import { modelList } from '@switchboard/data-plane/model-list';
import { streamErrorEvent, toErrorResponse } from '@switchboard/data-plane/openai-error';
import { answerFrontDoorClientError, createHandler, maxBodyBytes } from '@switchboard/data-plane/server';
import { readEvents } from '@switchboard/data-plane/upstream';
import { ApiError } from '@switchboard/runtime/api-error';
import { ConfigError } from '@switchboard/runtime/config';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import { defaultCatalogPath, ModelCatalog } from '@switchboard/runtime/model-catalog';
import { defaultPricingPath, Pricing } from '@switchboard/runtime/pricing';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';

/** The data plane's decisions that need no mesh: request checks, token bounds, SSE reading, error bodies. */

describe('chat requests', () => {
  it('checks the fields the front door acts on and keeps the rest for the upstream', () => {
    const request = parseChatRequest(
      { model: 'service/fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, temperature: 0.2, stream: true },
      100,
    );
    expect(request).toMatchObject({ model: 'service/fast', stream: true, maxTokens: 5 });
    expect(request.body.temperature).toBe(0.2);
    const refusal = (body: unknown) => {
      try {
        parseChatRequest(body, 100);
      } catch (err) {
        return [(err as ApiError).status, (err as ApiError).options.field];
      }
      return undefined;
    };
    expect(refusal([])).toEqual([400, undefined]);
    expect(refusal({ messages: [{ role: 'user', content: 'x' }] })).toEqual([400, 'model']);
    expect(refusal({ model: 'm', messages: [] })).toEqual([400, 'messages']);
    expect(refusal({ model: 'm', messages: [{ content: 'x' }] })).toEqual([400, 'messages[0].role']);
    expect(refusal({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: 'yes' })).toEqual([400, 'stream']);
    expect(refusal({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 0 })).toEqual([400, 'max_tokens']);
    expect(refusal({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 1.5 })).toEqual([400, 'max_completion_tokens']);
  });

  it('reads text from string and part contents, the last user message, and a prompt bound of at least a token per byte', () => {
    expect(
      textOf([
        { type: 'text', text: 'a' },
        { type: 'image_url', image_url: {} },
        { type: 'text', text: 'b' },
      ]),
    ).toBe('ab');
    const body = {
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'first' },
        { role: 'assistant', content: 'ok' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'héllo' },
            { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
          ],
        },
      ],
    };
    const bytes = Buffer.byteLength(JSON.stringify(body));
    const request = parseChatRequest(body, bytes);
    expect(lastUserMessage(request)).toBe('héllo');
    // A token per byte of the body, and an image at the cost of a detailed one.
    expect(promptTokenBound(request)).toBe(bytes + 2000);
    expect(parseChatRequest({ ...body, n: 3 }, bytes).choices).toBe(3);
    expect(() => parseChatRequest({ ...body, n: 17 }, bytes)).toThrow(/n must be/);
  });
});

describe('server-sent events from the upstream', () => {
  it('yields each complete event as it arrives, whatever the chunking, and holds only a partial one', async () => {
    const parts = ['data: {"a":1}\n', '\ndata: {"b":', '2}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n'];
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const part of parts) controller.enqueue(new TextEncoder().encode(part));
        controller.close();
      },
    });
    const events = [];
    for await (const event of readEvents(stream, 1000, new AbortController().signal)) events.push(event);
    expect(events.map((event) => event.data)).toEqual(['{"a":1}', '{"b":2}', '', '[DONE]']);
    expect(events[0].raw).toBe('data: {"a":1}\n\n');
  });

  it('keeps events apart when a CRLF is split between two chunks', async () => {
    const parts = ['data: {"a":1}\r\n\r', '\ndata: {"b":2}\r\n\r\n'];
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const part of parts) controller.enqueue(new TextEncoder().encode(part));
        controller.close();
      },
    });
    const events = [];
    for await (const event of readEvents(stream, 1000, new AbortController().signal)) events.push(event.data);
    expect(events).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('fails a stream that stalls longer than the idle timeout', async () => {
    const stream = new ReadableStream<Uint8Array>({ start() {} });
    const reading = (async () => {
      for await (const _ of readEvents(stream, 50, new AbortController().signal)) {
        // nothing arrives
      }
    })();
    await expect(reading).rejects.toThrow(/stalled/);
  });
});

describe('errors and models', () => {
  it('adds OpenAI’s type and param to the contract’s error body', () => {
    const own = toErrorResponse(new ApiError(402, 'spend_cap_exceeded', 'capped', { metadata: { scope: 'key' } }), 'req_1');
    expect(own).toMatchObject({
      status: 402,
      body: { error: { code: 'spend_cap_exceeded', type: 'insufficient_quota', param: null, request_id: 'req_1', metadata: { scope: 'key' } } },
    });
    const field = toErrorResponse(new ApiError(400, 'model_unavailable', 'no', { field: 'model' }), 'req_2');
    expect(field.body.error).toMatchObject({ type: 'invalid_request_error', param: 'model', field: 'model' });
    const mesh = toErrorResponse(new ConnectError('down', Code.Unavailable), 'req_3');
    expect(mesh).toMatchObject({ status: 503, body: { error: { code: 'service_unavailable', type: 'api_error' } } });
  });

  it('ends a cut stream with an error event of the catalogue: code, message, OpenAI’s api_error type, no param', () => {
    const event = (err: ApiError) => JSON.stringify(streamErrorEvent(err));
    expect(event(catalogued(errorCatalogue.streamTooLong, {}, 'front-door'))).toBe(
      '{"error":{"code":"stream_too_long","message":"The stream ran past its longest duration (STREAM_MAX_DURATION) and was cut; what was produced is billed.","type":"api_error","param":null}}',
    );
    expect(event(catalogued(errorCatalogue.upstreamError, { streamEndedEarly: true }, {}, 'front-door'))).toBe(
      '{"error":{"code":"upstream_error","message":"The upstream stream ended early.","type":"api_error","param":null}}',
    );
    expect(event(catalogued(errorCatalogue.serviceUnavailable, { because: 'shutdown' }, {}, 'front-door'))).toBe(
      '{"error":{"code":"service_unavailable","message":"The data plane is shutting down; what was produced is billed. Retry the request.","type":"api_error","param":null}}',
    );
  });

  it('lists the service tiers and each catalog model once, priced for the plan, the demo marked', () => {
    const catalog = ModelCatalog.parse(
      JSON.stringify({
        regions: { overseas: { base_url: 'https://o.example/v1', api_key_env: 'O' }, cn: { base_url: 'https://c.example/v1', api_key_env: 'C' } },
        models: [
          { id: 'm1', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '1', output_usd_per_1m: '2' },
          { id: 'm1', region: 'cn', tiers: [], input_usd_per_1m: '1.5', output_usd_per_1m: '2' },
          { id: 'm2', region: 'cn', tiers: ['balanced'], input_usd_per_1m: '0.10', output_usd_per_1m: '0.40' },
        ],
      }),
    );
    const pricing = Pricing.load(defaultPricingPath);
    const pro = modelList(catalog, pricing, 'pro', new Set(['cn']));
    expect(pro.data).toEqual([
      // The list price less the plan's discount (pro: 20 %).
      {
        id: 'service/fast',
        object: 'model',
        created: 1_700_000_000,
        owned_by: 'switchboard',
        tiers: ['fast'],
        pricing: { input_usd_per_1m: '0.08', output_usd_per_1m: '0.32' },
        demo: false,
      },
      {
        id: 'service/balanced',
        object: 'model',
        created: 1_700_000_000,
        owned_by: 'switchboard',
        tiers: ['balanced'],
        pricing: { input_usd_per_1m: '0.4', output_usd_per_1m: '1.6' },
        demo: true,
      },
      // In two regions: no region, the higher price of the two, with the plan's markup (pro: 3 %).
      {
        id: 'm1',
        object: 'model',
        created: 1_700_000_000,
        owned_by: 'switchboard-demo',
        tiers: ['fast'],
        pricing: { input_usd_per_1m: '1.545', output_usd_per_1m: '2.06' },
        demo: true,
      },
      {
        id: 'm2',
        object: 'model',
        created: 1_700_000_000,
        owned_by: 'switchboard-demo',
        region: 'cn',
        tiers: ['balanced'],
        pricing: { input_usd_per_1m: '0.103', output_usd_per_1m: '0.412' },
        demo: true,
      },
    ]);
    const keyed = modelList(catalog, pricing, 'payg', new Set());
    expect(keyed.data.map((model) => [model.id, model.owned_by, model.demo])).toEqual([
      ['service/fast', 'switchboard', false],
      ['service/balanced', 'switchboard', false],
      ['m1', 'upstream', false],
      ['m2', 'upstream', false],
    ]);
    expect(keyed.data[3].pricing).toEqual({ input_usd_per_1m: '0.105', output_usd_per_1m: '0.42' });
  });
});

describe('the demo upstream', () => {
  const catalog = ModelCatalog.load(defaultCatalogPath);
  const model = catalog.models.find((m) => m.id === 'gpt-4o-mini')!;
  const target = { model, region: catalog.regions.get(model.region)! };
  const sentence = `This is Switchboard's demo upstream, answering as gpt-4o-mini in the overseas region because OVERSEAS_API_KEY is not set; nothing left this machine. You said: "Say hello"`;
  const body = {
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'be kind' },
      { role: 'user', content: [{ type: 'text', text: '  Say\n hello ' }] },
    ],
  };

  it('answers a fixed sentence naming the model, the region and the missing key, echoing the user, with usage', async () => {
    const answer = (await demoUpstream(target, body).json()) as ChatCompletion;
    expect(answer).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-4o-mini',
      choices: [{ message: { role: 'assistant', content: sentence }, finish_reason: 'stop' }],
    });
    expect(answer.usage).toEqual({ prompt_tokens: 2, completion_tokens: sentence.split(' ').length, total_tokens: 2 + sentence.split(' ').length });
    // The echo is bounded; max_tokens bounds the answer.
    const long = (await demoUpstream(target, { ...body, messages: [{ role: 'user', content: 'x'.repeat(500) }], max_tokens: 100 }).json()) as ChatCompletion;
    expect(long.choices[0].message.content).toContain(`"${'x'.repeat(59)}…"`);
    const short = (await demoUpstream(target, { ...body, max_tokens: 3 }).json()) as ChatCompletion;
    expect(short.choices[0].message.content).toBe("This is Switchboard's");
    expect(short.usage?.completion_tokens).toBe(3);
  });

  it('streams the same sentence a token a chunk, with the usage chunk when asked for', async () => {
    const response = demoUpstream(target, { ...body, stream: true, stream_options: { include_usage: true } });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const events = [];
    for await (const event of readEvents(response.body!, 1000, new AbortController().signal)) events.push(event.data);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((data) => JSON.parse(data) as ChatCompletionChunk);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe(sentence);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 2, completion_tokens: sentence.split(' ').length } });
    const withoutUsage = demoUpstream(target, { ...body, stream: true, max_tokens: 2 });
    const data = [];
    for await (const event of readEvents(withoutUsage.body!, 1000, new AbortController().signal)) data.push(event.data);
    // The role, two tokens, the finish, [DONE].
    expect(data).toHaveLength(5);
    expect(data.some((d) => d.includes('"usage"'))).toBe(false);
  });
});

describe('DEMO_UPSTREAM', () => {
  const catalog = ModelCatalog.load(defaultCatalogPath);
  const env = { SWITCHBOARD_MESH_SECRET: 'x'.repeat(32) };

  it('serves the regions without a key from the demo, only when set', () => {
    expect(readDataPlaneConfig(catalog, env).demoRegions).toEqual(new Set());
    expect(readDataPlaneConfig(catalog, { ...env, DEMO_UPSTREAM: 'true' }).demoRegions).toEqual(new Set(['overseas', 'cn']));
    expect(readDataPlaneConfig(catalog, { ...env, DEMO_UPSTREAM: 'true', CN_API_KEY: 'sk-cn', OVERSEAS_API_KEY: '' }).demoRegions).toEqual(
      new Set(['overseas']),
    );
    expect(readDataPlaneConfig(catalog, { ...env, DEMO_UPSTREAM: 'true', CN_API_KEY: 'sk-cn', OVERSEAS_API_KEY: 'sk-o' }).demoRegions).toEqual(new Set());
  });

  it('stops a production start, naming the variable', () => {
    expect(() => readDataPlaneConfig(catalog, { ...env, DEMO_UPSTREAM: 'true', NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => readDataPlaneConfig(catalog, { ...env, DEMO_UPSTREAM: 'true', NODE_ENV: 'production' })).toThrow(
      /^DEMO_UPSTREAM=true is refused with NODE_ENV=production/,
    );
    expect(readDataPlaneConfig(catalog, { ...env, NODE_ENV: 'production' }).demoRegions.size).toBe(0);
  });
});

describe('the errors the front door answers before a key is checked', () => {
  /** Status, code and message of each answer: those of the error catalogue's entry, in the front door's words. */
  it('reads them from the error catalogue (docs/conventions.md#errors)', async () => {
    const unreachable = undefined as never;
    const handler = createHandler({
      log: createLogger('data-plane', 'silent'),
      metrics: new Metrics('data-plane'),
      completions: unreachable,
      lifecycle: { ready: true, draining: false },
    });
    const server = http.createServer(handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const answer = async (method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) => {
      const response = await fetch(`${base}${path}`, { method, ...init });
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      return [response.status, error.code, error.message];
    };
    const as = (err: ApiError) => [err.status, err.code, err.message];
    const key = `sb_${'a'.repeat(49)}`;
    const withKey = (headers: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...headers });
    try {
      expect(await answer('GET', '/v1/nothing')).toEqual(
        as(catalogued(errorCatalogue.routeNotFound, { method: 'GET', path: '/v1/nothing' }, {}, 'front-door')),
      );
      for (const headers of [{}, { authorization: 'Basic abc' }] as Record<string, string>[]) {
        expect(await answer('POST', '/v1/chat/completions', { body: '{}', headers })).toEqual([
          401,
          'unauthenticated',
          'Send an API key: Authorization: Bearer sb_….',
        ]);
      }
      expect(await answer('POST', '/v1/chat/completions', { body: '{}' })).toEqual(
        as(catalogued(errorCatalogue.unauthenticated, { headerSent: false }, {}, 'front-door')),
      );
      expect(await answer('POST', '/v1/chat/completions', { body: 'x=1', headers: withKey({ 'content-type': 'text/plain' }) })).toEqual(
        as(catalogued(errorCatalogue.unsupportedMediaType, {}, 'front-door')),
      );
      expect(await answer('POST', '/v1/chat/completions', { body: '{"model": ', headers: withKey({ 'content-type': 'application/json' }) })).toEqual(
        as(catalogued(errorCatalogue.invalidJson, {}, 'front-door')),
      );
      const big = JSON.stringify({ messages: 'x'.repeat(maxBodyBytes) });
      expect(await answer('POST', '/v1/chat/completions', { body: big, headers: withKey({ 'content-type': 'application/json' }) })).toEqual([
        413,
        'payload_too_large',
        `The request body is larger than ${maxBodyBytes} bytes.`,
      ]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('the requests Node refuses before any handler runs', () => {
  it('answers them with the front door’s error body, a request id and Cache-Control: no-store (docs/conventions.md#errors)', async () => {
    const server = http.createServer(
      createHandler({
        log: createLogger('data-plane', 'silent'),
        metrics: new Metrics('data-plane'),
        completions: undefined as never,
        lifecycle: { ready: true, draining: false },
      }),
    );
    server.on('clientError', answerFrontDoorClientError);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    /** The whole answer to `request`, sent as is on a socket of its own, until the server closes it. */
    const raw = (request: string) =>
      new Promise<{ status: number; headers: Map<string, string>; body: { error: Record<string, unknown> } }>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1');
        });
        socket.on('error', reject);
        socket.on('close', () => {
          const [head, body] = text.split('\r\n\r\n');
          const [statusLine, ...lines] = head.split('\r\n');
          const headers = new Map(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
          try {
            resolve({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) as { error: Record<string, unknown> } });
          } catch {
            reject(new Error(`the answer has no JSON body: ${JSON.stringify(text)}`));
          }
        });
      });
    try {
      const cases: Array<[string, number, string]> = [
        ['NOT A REQUEST LINE\r\n\r\n', 400, 'invalid_request'],
        [`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
      ];
      for (const [request, status, code] of cases) {
        const answer = await raw(request);
        expect(answer.status).toBe(status);
        expect(answer.headers.get('cache-control')).toBe('no-store');
        expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
        expect(answer.body.error).toMatchObject({
          code,
          message: expect.any(String),
          type: 'invalid_request_error',
          param: null,
          field: null,
          request_id: answer.headers.get('x-request-id'),
        });
        expect(answer.body.error.request_id).toMatch(/^req_/);
      }
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
