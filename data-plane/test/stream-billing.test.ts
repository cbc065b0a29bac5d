import { create, fromBinary } from '@bufbuild/protobuf';
import type { Client } from '@connectrpc/connect';
import { type UsageRecord, UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type KeyService, KeyStateSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { generateFullKey, hashKey } from '@switchboard/runtime/api-key-format';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type InProcessFrontDoor, startInProcessFrontDoor } from './in-process-front-door.js';

/**
 * What a stream is billed (docs/api/front-door.md#what-is-billed), through the front door's
 * server and a real upstream on loopback: the upstream's usage when it sends it; a complete
 * stream without it, whether it ended by `[DONE]` or the upstream closed it cleanly without one,
 * at the estimate's bounds; a stream the upstream broke off, at what was produced. The usage
 * record published to the work stream is what billing settles.
 */

const fullKey = generateFullKey();
let upstream: OpenAiUpstream;
let frontDoor: InProcessFrontDoor;
let base: string;

beforeAll(async () => {
  upstream = await OpenAiUpstream.start();
  const catalog = ModelCatalog.parse(
    JSON.stringify({
      regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'STREAM_BILLING_KEY' } },
      models: ['with-usage', 'done-no-usage', 'closed-no-done', 'broken'].map((id) => ({
        id,
        region: 'overseas',
        tiers: [],
        input_usd_per_1m: '1',
        output_usd_per_1m: '2',
      })),
    }),
  );
  upstream.mode('done-no-usage', { kind: 'no-usage', done: true });
  upstream.mode('closed-no-done', { kind: 'no-usage', done: false });
  upstream.mode('broken', { kind: 'break', tokens: 3 });
  const state = create(KeyStateSchema, {
    keyHash: hashKey(fullKey),
    keyId: 'key_1',
    workspaceId: 'org_1',
    status: 'active',
    routingPolicy: 'any',
    scopes: ['inference'],
    allModels: true,
    version: 1n,
  });
  const keys = { listKeyStates: async () => ({ states: [state], version: 1n, hasMore: false }) } as unknown as Pick<Client<typeof KeyService>, 'listKeyStates'>;
  frontDoor = await startInProcessFrontDoor({ catalog, keys });
  base = frontDoor.base;
});

afterAll(async () => {
  await frontDoor?.close();
  await upstream?.close();
});

/** A stream of `model` (8 tokens upstream, under max_tokens), as the client reads it, and the usage record it published. */
async function stream(model: string) {
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 50, stream: true });
  const before = frontDoor.published.length;
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' },
    body,
  });
  expect(response.status).toBe(200);
  const events = (await response.text())
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length));
  expect(frontDoor.published.length).toBe(before + 1);
  const record: UsageRecord = fromBinary(UsageRecordSchema, frontDoor.published[before]);
  return { bodyBytes: Buffer.byteLength(body), events, record };
}

/** The `service` block of the stream's last chunk, before its `[DONE]`. */
function serviceOf(events: string[]): { cost_usd: string; generation_id: string } {
  expect(events.at(-1)).toBe('[DONE]');
  return (JSON.parse(events.at(-2)!) as { service: { cost_usd: string; generation_id: string } }).service;
}

describe('a stream’s bill', () => {
  it('is the upstream’s usage when its usage chunk came', async () => {
    const { events, record } = await stream('with-usage');
    expect(record).toMatchObject({ inputTokens: 2n, outputTokens: 8n, status: 'completed' });
    expect(serviceOf(events)).toMatchObject({ generation_id: record.generationId, cost_usd: record.costUsd });
  });

  it('is the estimate’s bounds for a stream that ended with [DONE] and no usage chunk', async () => {
    const { bodyBytes, events, record } = await stream('done-no-usage');
    // The prompt bound (a token per byte of the body) and max_tokens.
    expect(record).toMatchObject({ inputTokens: BigInt(bodyBytes), outputTokens: 50n, status: 'completed' });
    expect(serviceOf(events)).toMatchObject({ generation_id: record.generationId, cost_usd: record.costUsd });
  });

  it('is the estimate’s bounds for a stream the upstream closed cleanly without [DONE] or usage', async () => {
    const { bodyBytes, events, record } = await stream('closed-no-done');
    expect(record).toMatchObject({ inputTokens: BigInt(bodyBytes), outputTokens: 50n, status: 'completed' });
    // The client still gets the stream's end: the service block and its [DONE].
    expect(serviceOf(events)).toMatchObject({ generation_id: record.generationId, cost_usd: record.costUsd });
  });

  it('is what was produced for a stream the upstream broke off', async () => {
    const { bodyBytes, events, record } = await stream('broken');
    // 4 bytes of the body a token, and a token per content delta.
    expect(record).toMatchObject({ inputTokens: BigInt(Math.ceil(bodyBytes / 4)), outputTokens: 3n, status: 'upstream_error' });
    expect(JSON.parse(events.at(-1)!)).toMatchObject({ error: { code: 'upstream_error' } });
  });
});
