import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { lastUserMessage, parseChatRequest, promptTokenBound, textOf } from '@switchboard/data-plane/chat-request';
import { toErrorResponse } from '@switchboard/data-plane/openai-error';
import { createHandler, maxBodyBytes, modelList } from '@switchboard/data-plane/server';
import { readEvents } from '@switchboard/data-plane/upstream';
import { ApiError } from '@switchboard/runtime/api-error';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { createLogger } from '@switchboard/runtime/log';
import { Metrics } from '@switchboard/runtime/metrics';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
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

  it('lists the service tiers and each catalog model once', () => {
    const catalog = ModelCatalog.parse(
      JSON.stringify({
        regions: { overseas: { base_url: 'https://o.example/v1', api_key_env: 'O' }, cn: { base_url: 'https://c.example/v1', api_key_env: 'C' } },
        models: [
          { id: 'm1', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '1', output_usd_per_1m: '2' },
          { id: 'm1', region: 'cn', tiers: [], input_usd_per_1m: '1', output_usd_per_1m: '2' },
        ],
      }),
    );
    expect(modelList(catalog).data.map((model) => model.id)).toEqual(['service/fast', 'service/balanced', 'm1']);
  });
});

describe('the errors the front door answers before a key is checked', () => {
  /** Status, code and message of each answer: those of the error catalogue's entry, in the front door's words. */
  it('reads them from the error catalogue (docs/conventions.md#errors)', async () => {
    const unreachable = undefined as never;
    const handler = createHandler({
      log: createLogger('data-plane', 'silent'),
      metrics: new Metrics('data-plane'),
      catalog: unreachable,
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
