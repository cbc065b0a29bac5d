import { randomBytes } from 'node:crypto';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { Money } from '@switchboard/runtime/money';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { bootMesh, expectErrorBody, restClient, signUp } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The data plane end to end (docs/api/front-door.md#routes), the way a user calls it: the official `openai` client
 * with nothing but an API key and the gateway's base URL, against two local OpenAI-compatible
 * upstreams (one per region) named by a model catalog of this run. Caps, billing, routing
 * policies, streaming, a client going away, feedback-driven routing, conversations and
 * failover are checked through what the user sees (REST) and what the upstreams received.
 */

// Model ids of this run only: routing scores of other runs in the same database stay apart.
const tag = randomBytes(3).toString('hex');
const FAST_A = `fast-a-${tag}`;
const FAST_B = `fast-b-${tag}`;
const FAST_CN = `fast-cn-${tag}`;
const BIG = `big-${tag}`;
const PASS_X = `pass-x-${tag}`;
const CN_PASS = `cn-pass-${tag}`;

/** How long an upstream may take to answer (its headers): short, so that a stream outlives it. */
const upstreamTimeout = '2s';

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let overseas: OpenAiUpstream;
let cn: OpenAiUpstream;
let catalog: TestCatalog | undefined;

beforeAll(async () => {
  [overseas, cn] = await Promise.all([OpenAiUpstream.start(), OpenAiUpstream.start()]);
  catalog = await writeTestCatalog({ overseas, cn }, [
    catalogModel(FAST_A, 'overseas', ['fast']),
    catalogModel(FAST_B, 'overseas', ['fast']),
    catalogModel(FAST_CN, 'cn', ['fast']),
    catalogModel(BIG, 'overseas', ['balanced'], '2.50', '10.00'),
    catalogModel(PASS_X, 'overseas', [], '1.00', '2.00'),
    catalogModel(CN_PASS, 'cn', [], '0.50', '1.00'),
  ]);
  mesh = await bootMesh({
    ...catalog.env,
    ROUTING_SEED: '7',
    UPSTREAM_TIMEOUT: upstreamTimeout,
    // With every region's key set the demo upstream answers nothing: the whole file runs against the real upstreams.
    DEMO_UPSTREAM: 'true',
  });
  call = restClient(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
  await Promise.all([overseas?.close(), cn?.close()]);
  await catalog?.remove();
});

interface Account {
  token: string;
  workspaceId: string;
  keyId: string;
  fullKey: string;
  client: OpenAI;
}

const clientFor = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${mesh.gatewayUrl}/v1`, maxRetries: 0 });

/** A new user (a new workspace with the tests' opening credit of 1.00) and an API key of it. */
async function account(key: { monthly_spend_cap_usd?: string; routing_policy?: string } = {}): Promise<Account> {
  const user = await signUp(call);
  const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'data plane', ...key } });
  expect(created.status, created.text).toBe(201);
  return {
    token: user.token,
    workspaceId: user.workspaceId,
    keyId: created.json.key.key_id,
    fullKey: created.json.full_key,
    client: clientFor(created.json.full_key),
  };
}

/** "Say hi" is 2 prompt tokens for the upstream (a token per 4 characters); it answers 8 tokens. */
const ask = (model = 'service/fast'): ChatCompletionCreateParamsNonStreaming => ({ model, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 });
/** What one `ask()` through a service tier costs: billing's fast tier, 2 × 0.10/1M + 8 × 0.40/1M. */
const fastCost = '0.0000034';
const answer = 'w1 w2 w3 w4 w5 w6 w7 w8';

interface ServiceInfo {
  generation_id: string;
  tier: string;
  routed_model: string;
  region: string;
  cost_usd: string;
}

/** The `service` object the data plane adds to a completion (or to a stream's last chunk). */
function serviceOf(body: object | undefined): ServiceInfo {
  const service = (body as { service?: ServiceInfo } | undefined)?.service;
  expect(service, JSON.stringify(body)).toBeDefined();
  return service!;
}

/** The error a call ends with: an OpenAI SDK APIError. */
async function apiError(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const outcome = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(outcome).toBeInstanceOf(OpenAI.APIError);
  return outcome as InstanceType<typeof OpenAI.APIError>;
}

const upstreamCalls = () => overseas.requests.length + cn.requests.length;
const balanceOf = async (token: string) => new Money((await call('GET', '/v1/billing/balance', { token })).json.balance_usd);
const spendOf = async (ws: Account) => new Money((await call('GET', `/v1/keys/${ws.keyId}`, { token: ws.token })).json.month_to_date_spend_usd);
const byTier = async (token: string) => {
  const response = await call('GET', '/v1/billing/usage/by-tier', { token });
  expect(response.status, response.text).toBe(200);
  return response.json.by_tier as Record<string, { cost_usd: string; requests: number }>;
};
const waitForSpend = (ws: Account, expected: Money) =>
  eventually(async () => (await spendOf(ws)).eq(expected), `month-to-date spend ${expected.toFixed()}`, 15_000);
const sum = (amounts: string[]) => amounts.reduce((total, amount) => total.plus(amount), new Money(0));

/** A generation as GET /v1/generations/{generation_id} answers it (docs/api/generations.md). */
interface GenerationRecord {
  generation_id: string;
  key_id: string;
  model: string;
  routed_model: string;
  tier: string;
  region: string | null;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
  upstream_cost_usd: string | null;
  streamed: boolean | null;
  status: string | null;
  latency_ms: number | null;
  time_to_first_token_ms: number | null;
  overhead_ms: number | null;
  conversation_id: string | null;
  feedback: { rating: number; tags: string[] } | null;
  created_at: string;
}

const generationOf = async (token: string, generationId: string): Promise<GenerationRecord> => {
  const response = await call('GET', `/v1/generations/${generationId}`, { token });
  expect(response.status, response.text).toBe(200);
  return response.json;
};

/** Every fast candidate of the overseas region streams slowly (an overseas-only key's tier). */
function slowOverseas(delayMs: number) {
  overseas.mode(FAST_A, { kind: 'slow', delayMs });
  overseas.mode(FAST_B, { kind: 'slow', delayMs });
}

function resetModes() {
  for (const model of [FAST_A, FAST_B, PASS_X]) overseas.mode(model, { kind: 'ok' });
  for (const model of [FAST_CN, CN_PASS]) cn.mode(model, { kind: 'ok' });
}

describe('the front door', () => {
  it('lists the service tiers and the catalog models, to API keys only', async () => {
    const ws = await account();
    const models = await ws.client.models.list();
    expect(models.data.map((model) => model.id)).toEqual(['service/fast', 'service/balanced', FAST_A, FAST_B, FAST_CN, BIG, PASS_X, CN_PASS]);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'switchboard', tiers: ['fast'], demo: false });
    expect(models.data.find((model) => model.id === PASS_X)).toMatchObject({
      owned_by: 'upstream',
      region: 'overseas',
      tiers: [],
      // The catalog's price with the default plan's markup of 5 %.
      pricing: { input_usd_per_1m: '1.05', output_usd_per_1m: '2.1' },
      demo: false,
    });
    await expect(clientFor('sb_not_a_key').models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('refuses a bad or revoked key with 401 (AuthenticationError) before anything goes upstream', async () => {
    const before = upstreamCalls();
    const bad = await apiError(clientFor('sb_not_a_real_key').chat.completions.create(ask()));
    expect(bad).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(bad).toMatchObject({ status: 401, code: 'invalid_api_key', type: 'authentication_error' });
    expect(upstreamCalls()).toBe(before);
    expect(bad.requestID).toBeTruthy();

    const ws = await account();
    expect((await ws.client.chat.completions.create(ask())).choices[0].message.content).toBe(answer);
    expect((await call('DELETE', `/v1/keys/${ws.keyId}`, { token: ws.token })).status).toBe(200);
    // The data plane's key replica hears of the revocation within a second (docs/money-path.md#replicas).
    const revokedAt = performance.now();
    const revoked = await eventually(
      async () => {
        const outcome = await ws.client.chat.completions.create(ask()).then(
          () => undefined,
          (err: unknown) => err,
        );
        return outcome instanceof OpenAI.AuthenticationError && outcome;
      },
      'the revoked key to be refused',
      1000,
    );
    expect(performance.now() - revokedAt).toBeLessThan(1000);
    expect(revoked.code).toBe('api_key_revoked');
  });
});

describe('request bodies', () => {
  it('answers 413 for a body over 1 MiB, declared or streamed, on the same connection, and nothing goes upstream', async () => {
    const ws = await account();
    const before = upstreamCalls();
    const big = JSON.stringify({ model: 'service/fast', messages: [{ role: 'user', content: 'x'.repeat(1024 * 1024 + 10) }] });
    const headers = { authorization: `Bearer ${ws.fullKey}`, 'content-type': 'application/json' };
    const declared = await fetch(`${mesh.gatewayUrl}/v1/chat/completions`, { method: 'POST', headers, body: big });
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { error: object }).error).toMatchObject({ code: 'payload_too_large', type: 'invalid_request_error' });
    const bytes = new TextEncoder().encode(big);
    const streamed = await fetch(`${mesh.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: new ReadableStream({
        start(controller) {
          for (let at = 0; at < bytes.length; at += 64 * 1024) controller.enqueue(bytes.slice(at, at + 64 * 1024));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect(upstreamCalls()).toBe(before);
  });
});

describe('caps and billing', () => {
  it('bills each call exactly, then answers 402 spend_cap_exceeded before any upstream call', async () => {
    // A cap of a few calls: each reserves its estimate (prompt bound and max_tokens) against it.
    const ws = await account({ monthly_spend_cap_usd: '0.00002' });
    const balanceBefore = await balanceOf(ws.token);
    expect(balanceBefore.eq('1.00')).toBe(true);
    const costs: string[] = [];
    let refusal: InstanceType<typeof OpenAI.APIError> | undefined;
    for (let i = 0; i < 10 && !refusal; i++) {
      const before = upstreamCalls();
      const outcome = await ws.client.chat.completions.create(ask()).then(
        (completion) => completion,
        (err: unknown) => err,
      );
      if (outcome instanceof OpenAI.APIError) {
        refusal = outcome;
        expect(upstreamCalls()).toBe(before);
        break;
      }
      const completion = outcome as OpenAI.ChatCompletion;
      expect(completion.choices[0].message.content).toBe(answer);
      expect(completion.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 8 });
      const service = serviceOf(completion);
      expect(service).toMatchObject({ tier: 'fast', cost_usd: fastCost, generation_id: expect.stringMatching(/^gen_/) });
      expect(upstreamCalls()).toBe(before + 1);
      costs.push(service.cost_usd);
      // The usage reaches the key's spend (and settles its reservation) through events.
      await waitForSpend(ws, sum(costs));
    }
    expect(costs.length).toBeGreaterThanOrEqual(1);
    expect(refusal).toBeDefined();
    expect(refusal!.status).toBe(402);
    expect(refusal!.code).toBe('spend_cap_exceeded');
    expect(refusal!.error).toMatchObject({ code: 'spend_cap_exceeded', type: 'insufficient_quota', metadata: { scope: 'key', cap_usd: '0.00002' } });
    const metadata = (refusal!.error as { metadata: { spend_usd: string } }).metadata;
    expect(new Money(metadata.spend_usd).eq(sum(costs))).toBe(true);

    // Billed exactly: the balance and the fast tier's usage moved by the sum of the costs returned.
    expect(balanceBefore.minus(await balanceOf(ws.token)).eq(sum(costs))).toBe(true);
    const fast = (await byTier(ws.token)).fast;
    expect(new Money(fast.cost_usd).eq(sum(costs))).toBe(true);
    expect(Number(fast.requests)).toBe(costs.length);

    // A cap the spend has reached: 402 too, and nothing goes upstream.
    const lowered = await call('PATCH', `/v1/keys/${ws.keyId}/spend-cap`, { token: ws.token, body: { monthly_spend_cap_usd: sum(costs).toFixed() } });
    expect(lowered.status, lowered.text).toBe(200);
    const before = upstreamCalls();
    const reached = await apiError(ws.client.chat.completions.create(ask()));
    expect(reached).toMatchObject({ status: 402, code: 'spend_cap_exceeded' });
    expect(upstreamCalls()).toBe(before);
    expect(balanceBefore.minus(await balanceOf(ws.token)).eq(sum(costs))).toBe(true);
  });

  it('never settles 50 concurrent calls above the cap: those that do not fit get 402', async () => {
    const cap = new Money('0.00005');
    const ws = await account({ monthly_spend_cap_usd: cap.toFixed() });
    const before = upstreamCalls();
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, () =>
        ws.client.chat.completions.create(ask()).then(
          (completion) => ({ completion }),
          (error: unknown) => ({ error }),
        ),
      ),
    );
    const served = outcomes.flatMap((outcome) => ('completion' in outcome ? [outcome.completion] : []));
    const refused = outcomes.flatMap((outcome) => ('error' in outcome ? [outcome.error as InstanceType<typeof OpenAI.APIError>] : []));
    expect(served.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const err of refused) {
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err).toMatchObject({ status: 402, code: 'spend_cap_exceeded' });
    }
    expect(upstreamCalls() - before).toBe(served.length);
    const settled = sum(served.map((completion) => serviceOf(completion).cost_usd));
    expect(settled.lte(cap)).toBe(true);
    await waitForSpend(ws, settled);
    expect((await spendOf(ws)).lte(cap)).toBe(true);
    expect(Number((await byTier(ws.token)).fast.requests)).toBe(served.length);
  });
});

describe('routing policies and models', () => {
  it('keeps a cn-only key in cn, refuses a model served only elsewhere (403) and an unknown one (400)', async () => {
    const ws = await account({ routing_policy: 'cn-only' });
    const overseasBefore = overseas.requests.length;
    const cnBefore = cn.requests.length;
    for (let i = 0; i < 10; i++) {
      const completion = await ws.client.chat.completions.create(ask());
      expect(serviceOf(completion)).toMatchObject({ tier: 'fast', routed_model: FAST_CN, region: 'cn', cost_usd: fastCost });
    }
    expect(overseas.requests.length).toBe(overseasBefore);
    expect(cn.requests.slice(cnBefore).map((request) => [request.model, request.authorization])).toEqual(Array(10).fill([FAST_CN, 'Bearer sk-cn']));

    // A passthrough model of cn: the catalog price × 1.05, (2 × 0.50 + 8 × 1.00)/1M × 1.05.
    const passthrough = await ws.client.chat.completions.create(ask(CN_PASS));
    expect(serviceOf(passthrough)).toMatchObject({ tier: 'passthrough', routed_model: CN_PASS, region: 'cn', cost_usd: '0.00000945' });
    expect(cn.requests.at(-1)).toMatchObject({ model: CN_PASS, authorization: 'Bearer sk-cn' });

    const before = upstreamCalls();
    const excluded = await apiError(ws.client.chat.completions.create(ask(PASS_X)));
    expect(excluded).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(excluded).toMatchObject({ status: 403, code: 'routing_policy_violation', param: 'model' });
    // The balanced tier has no cn candidate.
    const noCandidate = await apiError(ws.client.chat.completions.create(ask('service/balanced')));
    expect(noCandidate).toMatchObject({ status: 403, code: 'routing_policy_violation' });
    const unknown = await apiError(ws.client.chat.completions.create(ask(`no-such-model-${tag}`)));
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unknown).toMatchObject({ status: 400, code: 'model_unavailable', param: 'model', type: 'invalid_request_error' });
    expect(upstreamCalls()).toBe(before);

    // The same passthrough model with a key that may leave cn goes to the overseas upstream with its key.
    const anywhere = await account({ routing_policy: 'any' });
    const served = await anywhere.client.chat.completions.create(ask(PASS_X));
    expect(serviceOf(served)).toMatchObject({ tier: 'passthrough', routed_model: PASS_X, region: 'overseas', cost_usd: '0.0000189' });
    expect(overseas.requests.at(-1)).toMatchObject({ model: PASS_X, authorization: 'Bearer sk-overseas' });
  });
});

describe('streaming', () => {
  it('passes chunks on as the upstream sends them, ends with the service facts, and bills after the stream', async () => {
    const ws = await account({ routing_policy: 'overseas-only' });
    // 8 tokens 300 ms apart: a stream that lasts longer than UPSTREAM_TIMEOUT, which bounds only the wait for its headers.
    slowOverseas(300);
    try {
      const balanceBefore = await balanceOf(ws.token);
      const { data: stream, response } = await ws.client.chat.completions.create({ ...ask(), stream: true }).withResponse();
      const generationId = response.headers.get('x-service-generation-id');
      expect(generationId).toMatch(/^gen_/);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const chunks: ChatCompletionChunk[] = [];
      let text = '';
      let firstContentAt: number | undefined;
      let lastAt = 0;
      for await (const chunk of stream) {
        const now = performance.now();
        chunks.push(chunk);
        const content = chunk.choices[0]?.delta?.content;
        if (content) {
          firstContentAt ??= now;
          text += content;
        }
        lastAt = now;
      }
      expect(text).toBe(answer);
      // 7 more tokens 300 ms apart came after the first one: it was not held back until the end.
      expect(lastAt - firstContentAt!).toBeGreaterThan(1500);

      const service = serviceOf(chunks.at(-1));
      expect(service).toMatchObject({ generation_id: generationId, tier: 'fast', region: 'overseas', cost_usd: fastCost });
      expect([FAST_A, FAST_B]).toContain(service.routed_model);
      expect(chunks.find((chunk) => chunk.usage)?.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 8 });
      const upstreamRequest = overseas.requests.at(-1)!;
      expect(upstreamRequest).toMatchObject({ model: service.routed_model, authorization: 'Bearer sk-overseas' });
      expect(upstreamRequest.body).toMatchObject({ stream: true, stream_options: { include_usage: true }, max_tokens: 8 });
      expect(balanceBefore.minus(await balanceOf(ws.token)).eq(service.cost_usd)).toBe(true);

      // A completion without a stream carries the same header, naming its generation.
      const { data: completion, response: unary } = await ws.client.chat.completions.create(ask()).withResponse();
      expect(unary.headers.get('x-service-generation-id')).toBe(serviceOf(completion).generation_id);

      // The activity log has both, with what the data plane measured: the stream's first token came
      // 7 tokens (300 ms apart) before its end; a whole answer's first token is its end.
      const streamed = await generationOf(ws.token, generationId!);
      expect(streamed).toMatchObject({ routed_model: service.routed_model, region: 'overseas', streamed: true, status: 'completed', output_tokens: 8 });
      expect(streamed.latency_ms! - streamed.time_to_first_token_ms!).toBeGreaterThan(1500);
      const whole = await generationOf(ws.token, serviceOf(completion).generation_id);
      expect(whole).toMatchObject({ streamed: false, status: 'completed', time_to_first_token_ms: whole.latency_ms });
      for (const record of [streamed, whole]) expect(record.overhead_ms, JSON.stringify(record)).toBeLessThan(record.latency_ms! + 1);
    } finally {
      resetModes();
    }
  });

  it('bills what was produced for a client that goes away mid-stream', async () => {
    const ws = await account({ routing_policy: 'overseas-only' });
    slowOverseas(200);
    try {
      const balanceBefore = await balanceOf(ws.token);
      const controller = new AbortController();
      const { data: stream, response } = await ws.client.chat.completions.create({ ...ask(), stream: true }, { signal: controller.signal }).withResponse();
      const generationId = response.headers.get('x-service-generation-id')!;
      const seen: ChatCompletionChunk[] = [];
      for await (const chunk of stream) {
        seen.push(chunk);
        if (seen.length === 2) {
          controller.abort();
          break;
        }
      }
      expect(seen.some((chunk) => (chunk as { service?: unknown }).service)).toBe(false);

      // The generation is recorded, billed for the prompt and the tokens produced before the client left.
      const fast = await eventually(async () => {
        const tier = (await byTier(ws.token)).fast;
        return Number(tier.requests) === 1 && tier;
      }, 'the aborted generation to be billed');
      expect(new Money(fast.cost_usd).gt(0)).toBe(true);
      expect(balanceBefore.minus(await balanceOf(ws.token)).eq(fast.cost_usd)).toBe(true);
      const usage = await call('GET', '/v1/billing/usage?days=2', { token: ws.token });
      const outputTokens = (usage.json.data as Array<{ output_tokens: number | string }>).reduce((total, day) => total + Number(day.output_tokens), 0);
      expect(outputTokens).toBeGreaterThanOrEqual(1);
      expect(outputTokens).toBeLessThan(8);
      const generations = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'conversations' });
      expect(await generations.getGeneration({ generationId, workspaceId: ws.workspaceId })).toMatchObject({
        generationId,
        keyId: ws.keyId,
        model: 'service/fast',
        tier: 'fast',
      });
      expect(await generationOf(ws.token, generationId)).toMatchObject({ streamed: true, status: 'client_closed', output_tokens: outputTokens });

      // A provider that breaks the stream off: the client gets an error event, the generation is
      // billed for the 3 tokens produced and ends as upstream_error.
      overseas.mode(FAST_A, { kind: 'break', tokens: 3 });
      overseas.mode(FAST_B, { kind: 'break', tokens: 3 });
      const broken = await fetch(`${mesh.gatewayUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ws.fullKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...ask(), stream: true }),
      });
      expect(await broken.text()).toContain('"code":"upstream_error"');
      expect(await generationOf(ws.token, broken.headers.get('x-service-generation-id')!)).toMatchObject({
        streamed: true,
        status: 'upstream_error',
        output_tokens: 3,
      });
    } finally {
      resetModes();
    }
  });
});

describe('failover', () => {
  it('retries a failure before the first byte once on another candidate; when every candidate fails it is a 502', async () => {
    const ws = await account({ routing_policy: 'overseas-only' });
    try {
      // An error status, then no answer within UPSTREAM_TIMEOUT: calls routed to the failing model
      // end on the other one, so all succeed, from FAST_B.
      for (const mode of [{ kind: 'fail', status: 500 }, { kind: 'hang' }] as const) {
        overseas.mode(FAST_A, mode);
        let failedOver = 0;
        for (let i = 0; i < 30 && failedOver === 0; i++) {
          const a = overseas.callsTo(FAST_A);
          const b = overseas.callsTo(FAST_B);
          const completion = await ws.client.chat.completions.create(ask());
          expect(serviceOf(completion), mode.kind).toMatchObject({ routed_model: FAST_B, region: 'overseas', cost_usd: fastCost });
          expect(completion.choices[0].message.content).toBe(answer);
          expect(overseas.callsTo(FAST_B)).toBe(b + 1);
          failedOver += overseas.callsTo(FAST_A) - a;
        }
        expect(failedOver, mode.kind).toBe(1);
      }
      overseas.mode(FAST_A, { kind: 'fail', status: 500 });

      overseas.mode(FAST_B, { kind: 'fail', status: 503 });
      const before = overseas.requests.length;
      const failed = await apiError(ws.client.chat.completions.create(ask()));
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
      expect(failed).toMatchObject({ status: 502, code: 'upstream_error', type: 'api_error' });
      // The routed candidate and one other, no more.
      expect(
        overseas.requests
          .slice(before)
          .map((request) => request.model)
          .sort(),
      ).toEqual([FAST_A, FAST_B]);

      // A passthrough model has no other candidate: one attempt, then 502.
      overseas.mode(PASS_X, { kind: 'fail', status: 500 });
      const passBefore = overseas.callsTo(PASS_X);
      expect(await apiError(ws.client.chat.completions.create(ask(PASS_X)))).toMatchObject({ status: 502, code: 'upstream_error' });
      expect(overseas.callsTo(PASS_X)).toBe(passBefore + 1);

      // A request the provider refuses as malformed would fail anywhere: no failover, a 400 with its reason.
      overseas.mode(FAST_A, { kind: 'fail', status: 400 });
      overseas.mode(FAST_B, { kind: 'fail', status: 400 });
      const rejectedBefore = overseas.requests.length;
      const rejected = await apiError(ws.client.chat.completions.create(ask()));
      expect(rejected).toBeInstanceOf(OpenAI.BadRequestError);
      expect(rejected).toMatchObject({ status: 400, code: 'upstream_rejected', type: 'invalid_request_error' });
      expect(overseas.requests.length).toBe(rejectedBefore + 1);
    } finally {
      resetModes();
    }
  });
});

describe('conversations', () => {
  it("stores the last user message and the answer in the key's conversation; another workspace's is a 404 before any upstream call", async () => {
    const ws = await account();
    const conversation = await call('POST', '/v1/conversations', { token: ws.token, body: { title: 'through the data plane' } });
    expect(conversation.status, conversation.text).toBe(201);
    const conversationId: string = conversation.json.conversation_id;
    const headers = { 'X-Service-Conversation-Id': conversationId };
    const completion = await ws.client.chat.completions.create(
      {
        model: 'service/fast',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'An earlier question' },
          { role: 'assistant', content: 'An earlier answer' },
          { role: 'user', content: 'Three things to see in Lisbon?' },
        ],
        max_tokens: 8,
      },
      { headers },
    );
    expect(completion.choices[0].message.content).toBe(answer);
    // A streamed exchange is stored too, once the stream ended.
    const stream = await ws.client.chat.completions.create({ ...ask(), stream: true }, { headers });
    let streamed = '';
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? '';
    expect(streamed).toBe(answer);

    // Appended after the answer, through the work stream (docs/money-path.md#conversation-appends).
    const messages = await eventually(async () => {
      const listed = await call('GET', `/v1/conversations/${conversationId}/messages`, { token: ws.token });
      return listed.status === 200 && listed.json.data.length === 4 && listed;
    }, 'the exchanges to be appended');
    expect(messages.json.data.map((message: { role: string; content: string }) => [message.role, message.content])).toEqual([
      ['user', 'Three things to see in Lisbon?'],
      ['assistant', answer],
      ['user', 'Say hi'],
      ['assistant', answer],
    ]);

    const other = await account();
    const foreign = await call('POST', '/v1/conversations', { token: other.token, body: {} });
    expect(foreign.status, foreign.text).toBe(201);
    const before = upstreamCalls();
    for (const id of [foreign.json.conversation_id, 'conv_doesnotexist']) {
      const err = await apiError(ws.client.chat.completions.create(ask(), { headers: { 'X-Service-Conversation-Id': id } }));
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err).toMatchObject({ status: 404, code: 'conversation_not_found' });
    }
    expect(upstreamCalls()).toBe(before);
    expect((await call('GET', `/v1/conversations/${foreign.json.conversation_id}/messages`, { token: other.token })).json.data).toEqual([]);
    expect(Number((await byTier(ws.token)).fast.requests)).toBe(2);
  });
});

describe('reservations', () => {
  it('gives the cap room back at once when a request is refused after authorization or its upstream fails', async () => {
    // Room for one estimate, not two (a token per byte of the body and max_tokens: an upper bound).
    const ws = await account({ monthly_spend_cap_usd: '0.000015' });
    const other = await account();
    const foreign = (await call('POST', '/v1/conversations', { token: other.token, body: {} })).json.conversation_id;
    for (let i = 0; i < 3; i++) {
      const refused = await apiError(ws.client.chat.completions.create(ask(), { headers: { 'X-Service-Conversation-Id': foreign } }));
      expect(refused).toMatchObject({ status: 404, code: 'conversation_not_found' });
    }
    // Each refusal released its reservation: a call that fits the cap still goes through.
    const served = await ws.client.chat.completions.create(ask());
    expect(serviceOf(served).cost_usd).toBe(fastCost);
  });
});

describe('feedback', () => {
  it('takes feedback on the generation id, and routing moves away from the model rated down', async () => {
    const ws = await account({ routing_policy: 'overseas-only' });
    const served: Record<string, string[]> = { [FAST_A]: [], [FAST_B]: [] };
    const { data: first, response } = await ws.client.chat.completions.create(ask()).withResponse();
    const firstService = serviceOf(first);
    expect(response.headers.get('x-service-generation-id')).toBe(firstService.generation_id);
    served[firstService.routed_model].push(firstService.generation_id);
    // Generations of both candidates (no feedback yet: they share the traffic).
    for (let round = 0; round < 20 && (served[FAST_A].length < 30 || served[FAST_B].length < 30); round++) {
      const batch = await Promise.all(Array.from({ length: 10 }, () => ws.client.chat.completions.create(ask())));
      for (const completion of batch) {
        const service = serviceOf(completion);
        served[service.routed_model].push(service.generation_id);
      }
    }
    expect(served[FAST_A].length).toBeGreaterThanOrEqual(30);
    expect(served[FAST_B].length).toBeGreaterThanOrEqual(30);

    // FAST_A's answers rated down, FAST_B's up.
    const ratings = [...served[FAST_A].map((id) => [id, -1, FAST_A] as const), ...served[FAST_B].map((id) => [id, 1, FAST_B] as const)];
    for (let i = 0; i < ratings.length; i += 10) {
      await Promise.all(
        ratings.slice(i, i + 10).map(async ([generationId, rating, model]) => {
          const rated = await call('POST', '/v1/feedback', {
            token: ws.token,
            body: { generation_id: generationId, rating, tags: [rating < 0 ? 'inaccurate' : 'accurate'] },
          });
          expect(rated.status, rated.text).toBe(201);
          expect(rated.json).toMatchObject({ generation_id: generationId, rating, model });
        }),
      );
    }

    // The router caches scores briefly: wait until it shows the ratings.
    const routing = meshClient(RoutingService, mesh.urls.conversations, 'conversations', { caller: 'data-plane' });
    await eventually(async () => {
      const explained = await routing.explainRoute({ tier: 'fast', routingPolicy: 'overseas-only' });
      const a = explained.candidates.find((candidate) => candidate.model === FAST_A);
      const b = explained.candidates.find((candidate) => candidate.model === FAST_B);
      return a?.thumbsDown === BigInt(served[FAST_A].length) && b?.thumbsUp === BigInt(served[FAST_B].length);
    }, 'the router to see the ratings');

    // The data plane reads the scores again every ROUTING_REFRESH (docs/money-path.md#replicas): its picks follow.
    let next: string[] = [];
    await eventually(async () => {
      next = [];
      for (let i = 0; i < 20; i++) next.push(serviceOf(await ws.client.chat.completions.create(ask())).routed_model);
      return next.filter((model) => model === FAST_B).length >= 15;
    }, 'the data plane to route by the ratings');
    expect(next.filter((model) => model === FAST_B).length, next.join(', ')).toBeGreaterThanOrEqual(15);
  });
});

describe('generations', () => {
  it("lists a workspace's generations newest first by pages, an inference key its own, a read key all; another workspace's is a 404; feedback and prices show", async () => {
    const ws = await account({ routing_policy: 'overseas-only' });
    const second = await call('POST', '/v1/keys', { token: ws.token, body: { name: 'second', scopes: ['inference'] } });
    expect(second.status, second.text).toBe(201);
    const secondKey = { keyId: second.json.key.key_id as string, fullKey: second.json.full_key as string };
    const conversation = await call('POST', '/v1/conversations', { token: ws.token, body: {} });
    expect(conversation.status, conversation.text).toBe(201);
    const conversationId: string = conversation.json.conversation_id;

    // In order (each answered before the next): newest first, the passthrough one of the second key leads.
    const ids: string[] = [];
    ids.push(serviceOf(await ws.client.chat.completions.create(ask(), { headers: { 'X-Service-Conversation-Id': conversationId } })).generation_id);
    ids.push(serviceOf(await ws.client.chat.completions.create(ask())).generation_id);
    ids.push(serviceOf(await clientFor(secondKey.fullKey).chat.completions.create(ask(PASS_X))).generation_id);

    // Fields of a real completion: (2 × 0.10 + 8 × 0.40)/1M at the catalog price upstream, billed at the fast tier.
    const first = await generationOf(ws.token, ids[0]);
    expect(first).toMatchObject({
      generation_id: ids[0],
      key_id: ws.keyId,
      model: 'service/fast',
      tier: 'fast',
      region: 'overseas',
      input_tokens: 2,
      output_tokens: 8,
      cost_usd: fastCost,
      upstream_cost_usd: '0.0000034',
      streamed: false,
      status: 'completed',
      conversation_id: conversationId,
      feedback: null,
    });
    expect([FAST_A, FAST_B]).toContain(first.routed_model);
    expect(first.latency_ms).toBeGreaterThanOrEqual(0);
    expect(first.overhead_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(first.created_at)).toBeLessThanOrEqual(Date.now());
    expect(await generationOf(ws.token, ids[2])).toMatchObject({
      key_id: secondKey.keyId,
      model: PASS_X,
      routed_model: PASS_X,
      tier: 'passthrough',
      conversation_id: null,
    });

    // Pages of 2, newest first; the cursor of the last page is null.
    const page1 = await call('GET', '/v1/generations?limit=2', { token: ws.token });
    expect(page1.status, page1.text).toBe(200);
    expect(page1.json.data.map((g: GenerationRecord) => g.generation_id)).toEqual([ids[2], ids[1]]);
    expect(page1.json.has_more).toBe(true);
    const page2 = await call('GET', `/v1/generations?limit=2&after=${page1.json.next_cursor}`, { token: ws.token });
    expect(page2.json).toMatchObject({ data: [{ generation_id: ids[0] }], has_more: false, next_cursor: null });
    const byKey = await call('GET', `/v1/generations?key_id=${secondKey.keyId}`, { token: ws.token });
    expect(byKey.json.data.map((g: GenerationRecord) => g.generation_id)).toEqual([ids[2]]);
    for (const query of ['limit=0', 'limit=101', 'after=not-a-cursor']) {
      const refused = await call('GET', `/v1/generations?${query}`, { token: ws.token });
      expect(refused.status, query).toBe(400);
      expect(refused.json.error.code).toBe('invalid_request');
    }

    // A key with `inference` but not `read` sees its own generations only; another key's is not found.
    const asKey = await call('GET', '/v1/generations', { token: secondKey.fullKey });
    expect(asKey.status, asKey.text).toBe(200);
    expect(asKey.json.data.map((g: GenerationRecord) => g.generation_id)).toEqual([ids[2]]);
    expect((await call('GET', `/v1/generations?key_id=${ws.keyId}`, { token: secondKey.fullKey })).json.data).toEqual([]);
    expectErrorBody(await call('GET', `/v1/generations/${ids[0]}`, { token: secondKey.fullKey }), 404, 'generation_not_found');
    expect((await call('GET', `/v1/generations/${ids[2]}`, { token: secondKey.fullKey })).status).toBe(200);
    // A key with `read` (with or without `inference`) sees the workspace's, as its creator's session does.
    for (const scopes of [['inference', 'read'], ['read']]) {
      const created = await call('POST', '/v1/keys', { token: ws.token, body: { name: scopes.join('+'), scopes } });
      expect(created.status, created.text).toBe(201);
      const token = created.json.full_key as string;
      const listed = await call('GET', '/v1/generations', { token });
      expect(listed.status, `${scopes}: ${listed.text}`).toBe(200);
      expect(
        listed.json.data.map((g: GenerationRecord) => g.generation_id),
        `${scopes}`,
      ).toEqual([ids[2], ids[1], ids[0]]);
      const byOtherKey = await call('GET', `/v1/generations?key_id=${secondKey.keyId}`, { token });
      expect(
        byOtherKey.json.data.map((g: GenerationRecord) => g.generation_id),
        `${scopes}`,
      ).toEqual([ids[2]]);
      const one = await call('GET', `/v1/generations/${ids[0]}`, { token });
      expect(one.status, `${scopes}: ${one.text}`).toBe(200);
      expect(one.json).toMatchObject({ generation_id: ids[0], key_id: ws.keyId });
    }
    // A key with neither is refused, naming the scope the route states.
    const manager = await call('POST', '/v1/keys', { token: ws.token, body: { name: 'manage only', scopes: ['manage'] } });
    expect(manager.status, manager.text).toBe(201);
    const refused = await call('GET', `/v1/generations/${ids[0]}`, { token: manager.json.full_key as string });
    expectErrorBody(refused, 403, 'insufficient_scope');
    expect(refused.json.error.metadata).toEqual({ required_scope: 'inference' });

    // Another workspace sees none of them.
    const other = await account();
    const foreign = await call('GET', `/v1/generations/${ids[0]}`, { token: other.token });
    expect(foreign.status).toBe(404);
    expect(foreign.json.error.code).toBe('generation_not_found');
    expect((await call('GET', '/v1/generations', { token: other.token })).json).toEqual({ data: [], has_more: false, next_cursor: null });

    // Feedback reaches the log through feedback.recorded; the latest rating wins.
    for (const [rating, tags] of [
      [-1, ['slow']],
      [1, ['accurate']],
    ] as const) {
      const rated = await call('POST', '/v1/feedback', { token: ws.token, body: { generation_id: ids[1], rating, tags } });
      expect(rated.status, rated.text).toBeLessThan(300);
    }
    await eventually(async () => (await generationOf(ws.token, ids[1])).feedback?.rating === 1, 'the latest rating to show');
    expect((await generationOf(ws.token, ids[1])).feedback).toEqual({ rating: 1, tags: ['accurate'] });

    // Prices as the workspace's plan (payg) bills them: the tiers as listed, catalog models plus 5%. A key reads them with `read`.
    for (const token of [ws.token, ws.fullKey]) {
      const prices = await call('GET', '/v1/billing/prices', { token });
      expect(prices.status, prices.text).toBe(200);
      expect(prices.json.tiers).toEqual([
        { tier: 'fast', input_usd_per_1m: '0.1', output_usd_per_1m: '0.4' },
        { tier: 'balanced', input_usd_per_1m: '0.5', output_usd_per_1m: '2' },
      ]);
      expect(prices.json.models).toContainEqual({ id: PASS_X, region: 'overseas', tiers: [], input_usd_per_1m: '1.05', output_usd_per_1m: '2.1' });
      expect(prices.json.models).toContainEqual({ id: FAST_CN, region: 'cn', tiers: ['fast'], input_usd_per_1m: '0.105', output_usd_per_1m: '0.42' });
      expect(prices.json.models).toHaveLength(6);
    }
  });
});
