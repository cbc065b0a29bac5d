import { parseChatRequest, supportedParameters, unsupportedParameter } from '@switchboard/data-plane/chat-request';
import { toErrorResponse } from '@switchboard/data-plane/openai-error';
import { callUpstream } from '@switchboard/data-plane/upstream';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The allow-list of docs/api/front-door.md#parameters: what a chat request may carry, and what goes upstream. */

const messages = [{ role: 'user', content: 'hi' }];

/** A value of the right type for each parameter of the allow-list. */
const everyParameter: Record<string, unknown> = {
  model: 'service/fast',
  messages,
  max_tokens: 5,
  max_completion_tokens: 6,
  temperature: 0.2,
  top_p: 0.9,
  n: 2,
  stop: ['\n'],
  stream: true,
  stream_options: { include_usage: true },
  presence_penalty: 0.1,
  frequency_penalty: 0.1,
  logit_bias: { '50256': -100 },
  logprobs: true,
  top_logprobs: 2,
  seed: 7,
  user: 'u-1',
  response_format: { type: 'json_object' },
  tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  tool_choice: 'auto',
  parallel_tool_calls: false,
};

describe('the parameter allow-list', () => {
  it('takes every parameter of the list', () => {
    expect(Object.keys(everyParameter).sort()).toEqual([...supportedParameters].sort());
    expect(unsupportedParameter(parseChatRequest(everyParameter, 500))).toBeUndefined();
  });

  it('refuses any other with 400 unsupported_parameter naming it, as OpenAI’s param and our field', () => {
    for (const param of ['reasoning_effort', 'web_search_options', 'audio', 'functions', '__proto__']) {
      // As the client sent it: JSON.parse keeps "__proto__" as a key; null counts as sent.
      const body: unknown = JSON.parse(`{"model":"service/fast","messages":[{"role":"user","content":"hi"}],${JSON.stringify(param)}:null}`);
      const refusal = unsupportedParameter(parseChatRequest(body, 100));
      expect(refusal).toBeDefined();
      const { status, body: answer } = toErrorResponse(refusal, 'req_1');
      expect(status).toBe(400);
      expect(answer.error).toMatchObject({ code: 'unsupported_parameter', type: 'invalid_request_error', param, field: param, request_id: 'req_1' });
      expect(answer.error.message).toContain(JSON.stringify(param));
    }
  });

  it('names the first parameter outside the list, bounded in length', () => {
    const long = 'x'.repeat(10_000);
    const refusal = unsupportedParameter(parseChatRequest({ model: 'm', messages, store: true, [long]: 1 }, 100));
    expect(refusal?.options.field).toBe('store');
    const bounded = unsupportedParameter(parseChatRequest({ model: 'm', messages, [long]: 1 }, 100));
    expect(bounded?.options.field).toBe('x'.repeat(100));
    expect(bounded!.message.length).toBeLessThan(400);
  });

  it('leaves wrong types of listed parameters to the parse, which refuses them first', () => {
    expect(() => parseChatRequest({ model: 'm', messages, max_tokens: 'many', store: true }, 100)).toThrow(/max_tokens must be/);
  });

  it('bounds the output by max_completion_tokens when max_tokens is absent, by the larger when both are sent', () => {
    expect(parseChatRequest({ model: 'm', messages, max_completion_tokens: 7 }, 100).maxTokens).toBe(7);
    expect(parseChatRequest({ model: 'm', messages, max_tokens: 3, max_completion_tokens: 7 }, 100).maxTokens).toBe(7);
    expect(parseChatRequest({ model: 'm', messages, max_tokens: 9, max_completion_tokens: 7 }, 100).maxTokens).toBe(9);
    expect(parseChatRequest({ model: 'm', messages }, 100).maxTokens).toBeUndefined();
  });
});

describe('the upstream request', () => {
  let upstream: OpenAiUpstream;
  beforeAll(async () => {
    upstream = await OpenAiUpstream.start();
  });
  afterAll(() => upstream.close());

  it('carries only the parameters of the list, with the catalog’s model id', async () => {
    const catalog = ModelCatalog.parse(
      JSON.stringify({
        regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'TEST_UPSTREAM_KEY' } },
        models: [{ id: 'm-up', region: 'overseas', tiers: ['fast'], input_usd_per_1m: '1', output_usd_per_1m: '2' }],
      }),
    );
    const model = catalog.models[0];
    const response = await callUpstream(
      { model, region: catalog.regions.get(model.region)! },
      { model: 'service/fast', messages, temperature: 0.5, store: true },
      { headersTimeoutMs: 5000, apiKeys: {}, signal: new AbortController().signal },
    );
    expect(response.status).toBe(200);
    await response.json();
    expect(upstream.requests.at(-1)?.body).toEqual({ model: 'm-up', messages, temperature: 0.5 });
  });
});
