import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient, outcomeOf } from '@switchboard/runtime/testing';
import { bootMesh, newUser, restClient } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Self-learning routing through its real path (docs/api/conversations.md#self-learning-routing, docs/api/internal-calls.md#routemodel, docs/api/front-door.md): generations recorded by the
 * data plane through billing's RecordUsage with the model that served them, rated through REST
 * feedback, and RouteModel (seeded) shifting the tier's traffic away from the model rated down,
 * within the geographic policy, with an exploration floor that never starves it.
 */

// Model ids of this run only: the routing scores of other suites in the same database stay apart.
const tag = randomBytes(3).toString('hex');
const A = `acme-fast-a-${tag}`;
const B = `acme-fast-b-${tag}`;
const C = `cn-fast-c-${tag}`;
const D = `acme-balanced-d-${tag}`;
const N = 20;
const CALLS = 1000;

let mesh: Mesh;
let catalogDir: string;
let call: ReturnType<typeof restClient>;
let usage: ReturnType<typeof meshClient<typeof UsageService>>;
let routing: ReturnType<typeof meshClient<typeof RoutingService>>;

beforeAll(async () => {
  catalogDir = await mkdtemp(path.join(tmpdir(), 'switchboard-routing-'));
  const catalogFile = path.join(catalogDir, 'models.json');
  const model = (id: string, region: string, tiers: string[]) => ({ id, region, tiers, input_usd_per_1m: '0.10', output_usd_per_1m: '0.40' });
  await writeFile(
    catalogFile,
    JSON.stringify({
      regions: {
        overseas: { base_url: 'https://overseas.example.com/v1', api_key_env: 'OVERSEAS_API_KEY' },
        cn: { base_url: 'https://cn.example.com/v1', api_key_env: 'CN_API_KEY' },
      },
      // The balanced tier has no cn candidate.
      models: [model(A, 'overseas', ['fast']), model(B, 'overseas', ['fast']), model(C, 'cn', ['fast']), model(D, 'overseas', ['balanced'])],
    }),
  );
  mesh = await bootMesh({ ROUTING_SEED: '42', SWITCHBOARD_MODELS_FILE: catalogFile });
  call = restClient(mesh.gatewayUrl);
  usage = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' });
  routing = meshClient(RoutingService, mesh.urls.conversations, 'conversations', { caller: 'data-plane' });
});

afterAll(async () => {
  await mesh?.stop();
  if (catalogDir) await rm(catalogDir, { recursive: true, force: true });
});

async function failure(promise: Promise<unknown>) {
  return promise.then(
    () => undefined,
    (err: unknown) => {
      const error = ConnectError.from(err);
      const detail = error.findDetails(ErrorDetailSchema)[0];
      return { code: Code[error.code], errorCode: detail?.code, field: detail?.field };
    },
  );
}

/** How many of `CALLS` RouteModel calls land on each model, and in which regions. */
async function sample(tier: string, routingPolicy: string) {
  const models: Record<string, number> = {};
  const regions: Record<string, number> = {};
  for (let done = 0; done < CALLS; done += 50) {
    const batch = await Promise.all(Array.from({ length: 50 }, () => routing.routeModel({ tier, routingPolicy })));
    for (const { model, region } of batch) {
      models[model] = (models[model] ?? 0) + 1;
      regions[region] = (regions[region] ?? 0) + 1;
    }
  }
  return { models, regions };
}

describe('self-learning routing', () => {
  it('moves a tier away from the model rated down, keeps an exploration floor, and respects the routing policy', async () => {
    const registered = await call('POST', '/v1/auth/register', { body: newUser() });
    expect(registered.status, registered.text).toBe(201);
    const token = registered.json.session.access_token;
    const workspaceId = registered.json.user.personal_workspace_id;
    const key = await call('POST', '/v1/keys', { token, body: { name: 'data plane' } });
    expect(key.status, key.text).toBe(201);

    // Before any feedback every candidate has the flat prior Beta(1, 1).
    const before = await routing.explainRoute({ tier: 'fast', routingPolicy: 'any' });
    expect(before.candidates.map((c) => [c.model, c.thumbsUp, c.thumbsDown, c.alpha, c.beta])).toEqual([
      [A, 0n, 0n, 1, 1],
      [B, 0n, 0n, 1, 1],
      [C, 0n, 0n, 1, 1],
    ]);

    // The data plane records N generations served by A and N by B for the tier alias.
    const generations: Array<{ id: string; routedModel: string }> = [];
    for (const routedModel of [A, B]) {
      for (let i = 0; i < N; i++) generations.push({ id: `gen_${tag}_${routedModel === A ? 'a' : 'b'}${i}`, routedModel });
    }
    await Promise.all(
      generations.map(async ({ id, routedModel }) => {
        const recorded = await usage.recordUsage({
          generationId: id,
          keyId: key.json.key.key_id,
          workspaceId,
          model: 'service/fast',
          routedModel,
          inputTokens: 100n,
          outputTokens: 50n,
        });
        expect(recorded).toMatchObject({ tier: 'fast', duplicate: false });
      }),
    );

    // The workspace rates A's generations down and B's up, through REST.
    for (const { id, routedModel } of generations) {
      const rating = routedModel === A ? -1 : 1;
      const rated = await call('POST', '/v1/feedback', { token, body: { generation_id: id, rating } });
      expect(rated.status, rated.text).toBe(201);
      expect(rated.json).toMatchObject({ generation_id: id, rating, model: routedModel });
    }

    // Feedback counts for the model that served each generation, not the tier alias.
    const summary = await call('GET', '/v1/feedback/summary', { token });
    expect(summary.status, summary.text).toBe(200);
    expect(summary.json).toMatchObject({ total: 2 * N, thumbs_up: N, thumbs_down: N });
    expect(summary.json.by_model).toEqual({
      [A]: { total: N, thumbs_up: 0, thumbs_down: N },
      [B]: { total: N, thumbs_up: N, thumbs_down: 0 },
    });

    // The router caches scores for up to a second: wait until it shows the evidence.
    const explained = await eventually(async () => {
      const answer = await routing.explainRoute({ tier: 'fast', routingPolicy: 'overseas-only' });
      const a = answer.candidates.find((c) => c.model === A);
      return a?.thumbsDown === BigInt(N) && answer;
    }, 'ExplainRoute to show the ratings');
    expect(explained).toMatchObject({ tier: 'fast', routingPolicy: 'overseas-only', exploration: 0.05 });
    expect(
      explained.candidates.map(({ model, region, allowed, thumbsUp, thumbsDown, alpha, beta, mean }) => ({
        model,
        region,
        allowed,
        thumbsUp,
        thumbsDown,
        alpha,
        beta,
        mean,
      })),
    ).toEqual([
      { model: A, region: 'overseas', allowed: true, thumbsUp: 0n, thumbsDown: BigInt(N), alpha: 1, beta: 1 + N, mean: 1 / (N + 2) },
      { model: B, region: 'overseas', allowed: true, thumbsUp: BigInt(N), thumbsDown: 0n, alpha: 1 + N, beta: 1, mean: (N + 1) / (N + 2) },
      { model: C, region: 'cn', allowed: false, thumbsUp: 0n, thumbsDown: 0n, alpha: 1, beta: 1, mean: 0.5 },
    ]);
    const allowedUnder = async (routingPolicy: string) =>
      (await routing.explainRoute({ tier: 'fast', routingPolicy })).candidates.map((c) => [c.model, c.allowed]);
    expect(await allowedUnder('cn-only')).toEqual([
      [A, false],
      [B, false],
      [C, true],
    ]);
    expect(await allowedUnder('any')).toEqual([
      [A, true],
      [B, true],
      [C, true],
    ]);
    // No score is kept for the tier alias.
    expect((await routing.explainRoute({ tier: 'fast', routingPolicy: 'any' })).candidates.map((c) => c.model)).not.toContain('service/fast');

    // overseas-only: A falls well below 10% (about exploration / 2) but is still picked: the floor.
    const overseas = await sample('fast', 'overseas-only');
    expect(overseas.regions).toEqual({ overseas: CALLS });
    expect(overseas.models[C]).toBeUndefined();
    expect(overseas.models[A] ?? 0).toBeLessThan(CALLS * 0.1);
    expect(overseas.models[A] ?? 0).toBeGreaterThanOrEqual(1);
    expect(overseas.models[B]).toBeGreaterThan(CALLS * 0.85);

    // any: A still below 10% and still picked; C (no evidence) competes with B.
    const any = await sample('fast', 'any');
    expect(any.models[A] ?? 0).toBeLessThan(CALLS * 0.1);
    expect(any.models[A] ?? 0).toBeGreaterThanOrEqual(1);
    expect(any.models[B]).toBeGreaterThan(CALLS * 0.75);
    expect(any.models[C] ?? 0).toBeGreaterThanOrEqual(1);

    // cn-only never leaves cn.
    const cn = await sample('fast', 'cn-only');
    expect(cn.models).toEqual({ [C]: CALLS });
    expect(cn.regions).toEqual({ cn: CALLS });
  });

  it('refuses an unknown tier, an unknown policy, and a policy that excludes every candidate', async () => {
    expect(await failure(routing.routeModel({ tier: 'turbo', routingPolicy: 'any' }))).toMatchObject({
      code: 'InvalidArgument',
      errorCode: 'invalid_request',
      field: 'tier',
    });
    expect(await failure(routing.routeModel({ tier: 'service/fast', routingPolicy: 'any' }))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(routing.explainRoute({ tier: '', routingPolicy: 'any' }))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(routing.routeModel({ tier: 'fast', routingPolicy: 'mars-only' }))).toMatchObject({
      code: 'InvalidArgument',
      field: 'routing_policy',
    });
    // The balanced tier of this catalog has no cn model.
    expect(await failure(routing.routeModel({ tier: 'balanced', routingPolicy: 'cn-only' }))).toEqual({
      code: 'FailedPrecondition',
      errorCode: 'routing_policy_violation',
      field: 'routing_policy',
    });
    expect((await routing.explainRoute({ tier: 'balanced', routingPolicy: 'cn-only' })).candidates.map((c) => [c.model, c.allowed])).toEqual([[D, false]]);
    expect(await routing.routeModel({ tier: 'balanced', routingPolicy: 'overseas-only' })).toMatchObject({ model: D, region: 'overseas' });
  });

  it('answers RouteModel and ExplainRoute to the data plane only', async () => {
    for (const caller of ['gateway', 'billing', 'keys', 'webhooks', 'identity']) {
      const client = meshClient(RoutingService, mesh.urls.conversations, 'conversations', { caller });
      expect(await outcomeOf(client.routeModel({ tier: 'fast', routingPolicy: 'any' })), caller).toBe('PermissionDenied');
      expect(await outcomeOf(client.explainRoute({ tier: 'fast', routingPolicy: 'any' })), caller).toBe('PermissionDenied');
    }
    const signedIn = meshClient(RoutingService, mesh.urls.conversations, 'conversations', {
      caller: 'gateway',
      principalId: 'usr_x',
      principalType: 'user',
      workspaceId: 'org_x',
      role: 'owner',
    });
    expect(await outcomeOf(signedIn.routeModel({ tier: 'fast', routingPolicy: 'any' }))).toBe('PermissionDenied');
    expect(await outcomeOf(meshClient(RoutingService, mesh.urls.conversations, 'conversations', null).routeModel({ tier: 'fast' }))).toBe('Unauthenticated');
    expect(await outcomeOf(routing.routeModel({ tier: 'fast', routingPolicy: 'any' }))).toBe('ok');
  });
});
