import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Code, ConnectError } from '@connectrpc/connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { Router } from '@switchboard/conversations/routing';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { CatalogError, defaultCatalogPath, ModelCatalog } from '@switchboard/runtime/model-catalog';
import { Sampler } from '@switchboard/runtime/routing-sampler';
import { requireEnv } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Routing's parts on their own: the model catalog parser, and the Router against a migrated
 * schema of its own with scores written directly.
 */

const regions = {
  overseas: { base_url: 'https://overseas.example.com/v1', api_key_env: 'OVERSEAS_API_KEY' },
  cn: { base_url: 'http://cn.example.internal/v1', api_key_env: 'CN_API_KEY' },
};
const model = (id: string, region: string, tiers: string[], extra: Record<string, unknown> = {}) => ({
  id,
  region,
  tiers,
  input_usd_per_1m: '0.10',
  output_usd_per_1m: '0.40',
  ...extra,
});

/** The message ModelCatalog.parse refuses `catalog` with (fails the test when it accepts it). */
function refusal(catalog: unknown): string {
  const json = typeof catalog === 'string' ? catalog : JSON.stringify(catalog);
  try {
    ModelCatalog.parse(json);
  } catch (err) {
    expect(err).toBeInstanceOf(CatalogError);
    return (err as Error).message;
  }
  throw new Error(`the catalog was accepted: ${json}`);
}

describe('model catalog', () => {
  it('accepts the shipped default (runtime/models.json)', () => {
    const catalog = ModelCatalog.parse(readFileSync(defaultCatalogPath, 'utf8'), defaultCatalogPath);
    expect([...catalog.regions.keys()].sort()).toEqual(['cn', 'overseas']);
    expect(catalog.candidates('fast').map((m) => [m.id, m.region])).toEqual([
      ['gpt-4o-mini', 'overseas'],
      ['gpt-4.1-nano', 'overseas'],
      ['qwen-turbo', 'cn'],
    ]);
    expect(catalog.candidates('balanced').map((m) => m.region)).toContain('cn');
    expect(catalog.candidates('balanced').map((m) => m.region)).toContain('overseas');
    // A model of no tier is passthrough only.
    expect(catalog.models.find((m) => m.id === 'o3-mini')).toMatchObject({ tiers: [], inputUsdPer1m: '1.10', outputUsdPer1m: '4.40' });
    expect(ModelCatalog.load(defaultCatalogPath).models).toEqual(catalog.models);
  });

  it('accepts a model once per region (the same id in two regions), http base URLs, and a model without tiers', () => {
    const catalog = ModelCatalog.parse(
      JSON.stringify({
        regions,
        models: [model('m', 'overseas', ['fast', 'fast', 'balanced']), model('m', 'cn', ['fast']), { ...model('p', 'cn', []), tiers: undefined }],
      }),
    );
    expect(catalog.candidates('fast').map((m) => `${m.id}@${m.region}`)).toEqual(['m@overseas', 'm@cn']);
    expect(catalog.candidates('balanced').map((m) => `${m.id}@${m.region}`)).toEqual(['m@overseas']);
    expect(catalog.models[0].tiers).toEqual(['fast', 'balanced']);
    expect(catalog.models[2].tiers).toEqual([]);
    expect(catalog.regions.get('cn')).toEqual({ baseUrl: 'http://cn.example.internal/v1', apiKeyEnv: 'CN_API_KEY' });
  });

  it('refuses a malformed catalog, naming the entry', () => {
    const ok = model('a', 'overseas', ['fast']);
    const cases: Array<[unknown, RegExp]> = [
      ['{"regions": ', /not JSON/],
      [[], /the root must be an object/],
      [{ models: [ok] }, /regions must be an object/],
      [{ regions }, /models must be an array/],
      [{ regions, models: [ok, model('b', 'eu', ['fast'])] }, /models\[1\]\.region names no region/],
      [{ regions: { overseas: regions.overseas }, models: [ok, model('b', 'cn', ['fast'])] }, /models\[1\]\.region names no region/],
      [{ regions, models: [model('a', 'overseas', ['fast'], { input_usd_per_1m: 0.15 })] }, /models\[0\]\.input_usd_per_1m must be a decimal string/],
      [{ regions, models: [ok, model('b', 'cn', [], { output_usd_per_1m: '-1' })] }, /models\[1\]\.output_usd_per_1m/],
      [{ regions, models: [ok, model('b', 'cn', [], { output_usd_per_1m: '1e3' })] }, /models\[1\]\.output_usd_per_1m/],
      [{ regions, models: [ok, model('b', 'cn', []), model('a', 'overseas', ['balanced'])] }, /models\[2\] repeats a in overseas/],
      [{ regions, models: [ok, model('b', 'cn', ['slow'])] }, /models\[1\]\.tiers/],
      [{ regions, models: [ok, model('b', 'cn', 'fast' as unknown as string[])] }, /models\[1\]\.tiers/],
      [{ regions, models: [ok, model('', 'cn', [])] }, /models\[1\]\.id must be a non-empty string/],
      [{ regions, models: [ok, 'b'] }, /models\[1\] must be an object/],
      [{ regions: { ...regions, eu: regions.cn }, models: [ok] }, /regions\.eu is not a region/],
      [{ regions: { ...regions, cn: { ...regions.cn, base_url: 'not a url' } }, models: [ok] }, /regions\.cn\.base_url is not a URL/],
      [{ regions: { ...regions, cn: { ...regions.cn, base_url: 'ftp://x.example.com' } }, models: [ok] }, /regions\.cn\.base_url must be an http\(s\) URL/],
      [{ regions: { ...regions, cn: { ...regions.cn, api_key_env: 'cn key' } }, models: [ok] }, /regions\.cn\.api_key_env/],
    ];
    for (const [catalog, message] of cases) expect(refusal(catalog), JSON.stringify(catalog)).toMatch(message);
    expect(() => ModelCatalog.load('/nonexistent/models.json')).toThrow(/cannot read \/nonexistent\/models\.json/);
  });
});

describe('router', () => {
  const schema = `conversations_domain_${randomBytes(3).toString('hex')}`;
  let db: Knex;
  const catalog = ModelCatalog.parse(
    JSON.stringify({
      regions,
      models: [model('bad', 'overseas', ['fast']), model('good', 'overseas', ['fast']), model('local', 'cn', ['fast']), model('big', 'overseas', ['balanced'])],
    }),
  );

  beforeAll(async () => {
    db = createDb(requireEnv('DATABASE_URL'), schema, 4);
    await migrate(db, schema, path.join(fileURLToPath(new URL('../dist/migrations/', import.meta.url))));
    await db('routing_scores').insert([
      { tier: 'fast', model: 'bad', thumbs_up: 0, thumbs_down: 30 },
      { tier: 'fast', model: 'good', thumbs_up: 30, thumbs_down: 0 },
      // Evidence of another tier does not count for this one.
      { tier: 'balanced', model: 'bad', thumbs_up: 500, thumbs_down: 0 },
    ]);
  });

  afterAll(async () => {
    await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
    await db.destroy();
  });

  async function shares(router: Router, tier: string, policy: string, calls: number): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (let i = 0; i < calls; i++) {
      const { model } = await router.route(tier, policy);
      counts[model as string] = (counts[model as string] ?? 0) + 1;
    }
    return Object.fromEntries(Object.entries(counts).map(([name, count]) => [name, count / calls]));
  }

  it('keeps a candidate with 0 up / 30 down near the exploration floor, and never starves it', async () => {
    const router = new Router({ db, catalog, sampler: new Sampler(42) });
    expect(router.exploration).toBe(0.05);
    // overseas-only: bad is picked by the uniform share of explorations only (0.05 / 2).
    const overseas = await shares(router, 'fast', 'overseas-only', 4000);
    expect(overseas.local).toBeUndefined();
    expect(overseas.bad).toBeGreaterThan(0.01);
    expect(overseas.bad).toBeLessThan(0.045);
    expect(overseas.good).toBeGreaterThan(0.95);
    // any: bad gets 0.05 / 3; local (no evidence, Beta(1, 1)) sometimes beats good's Beta(31, 1).
    const any = await shares(router, 'fast', 'any', 4000);
    expect(any.bad).toBeGreaterThan(0.005);
    expect(any.bad).toBeLessThan(0.035);
    expect(any.local).toBeGreaterThan(0.03);
    expect(any.good).toBeGreaterThan(0.85);
    // cn-only: the single cn candidate, always.
    expect(await shares(router, 'fast', 'cn-only', 200)).toEqual({ local: 1 });
    // An empty policy is any.
    expect((await router.explain('fast', '')).routingPolicy).toBe('any');
  });

  it('without exploration never picks the candidate with only thumbs down; the same seed gives the same picks', async () => {
    const picks = async (seed: number, exploration: number) => {
      const router = new Router({ db, catalog, sampler: new Sampler(seed), exploration });
      const out: string[] = [];
      for (let i = 0; i < 500; i++) out.push((await router.route('fast', 'overseas-only')).model as string);
      return out;
    };
    expect(new Set(await picks(42, 0))).toEqual(new Set(['good']));
    expect(await picks(42, 0.3)).toEqual(await picks(42, 0.3));
    expect(await picks(42, 0.3)).not.toEqual(await picks(7, 0.3));
  });

  it('explains each candidate: thumbs, posterior, whether the policy allows it, and the exploration', async () => {
    const router = new Router({ db, catalog, sampler: new Sampler(1), exploration: 0.1 });
    const explained = await router.explain('fast', 'overseas-only');
    expect(explained).toMatchObject({ tier: 'fast', routingPolicy: 'overseas-only', exploration: 0.1 });
    expect(explained.candidates).toEqual([
      { model: 'bad', region: 'overseas', allowed: true, thumbsUp: 0n, thumbsDown: 30n, alpha: 1, beta: 31, mean: 1 / 32 },
      { model: 'good', region: 'overseas', allowed: true, thumbsUp: 30n, thumbsDown: 0n, alpha: 31, beta: 1, mean: 31 / 32 },
      { model: 'local', region: 'cn', allowed: false, thumbsUp: 0n, thumbsDown: 0n, alpha: 1, beta: 1, mean: 0.5 },
    ]);
    expect((await router.explain('fast', 'cn-only')).candidates?.map((c) => c.allowed)).toEqual([false, false, true]);
    expect((await router.explain('balanced', 'any')).candidates).toEqual([
      { model: 'big', region: 'overseas', allowed: true, thumbsUp: 0n, thumbsDown: 0n, alpha: 1, beta: 1, mean: 0.5 },
    ]);
  });

  it('reads scores at most every scoresMaxAgeMs, and at once after forgetScores', async () => {
    const router = new Router({ db, catalog, sampler: new Sampler(1), scoresMaxAgeMs: 60_000 });
    const thumbsUpOfLocal = async () => (await router.explain('fast', 'any')).candidates?.find((c) => c.model === 'local')?.thumbsUp;
    expect(await thumbsUpOfLocal()).toBe(0n);
    await db('routing_scores').insert({ tier: 'fast', model: 'local', thumbs_up: 4, thumbs_down: 0 });
    try {
      expect(await thumbsUpOfLocal()).toBe(0n);
      router.forgetScores();
      expect(await thumbsUpOfLocal()).toBe(4n);
    } finally {
      await db('routing_scores').where({ tier: 'fast', model: 'local' }).delete();
    }
  });

  it('refuses an unknown tier or policy, and a policy that excludes every candidate', async () => {
    const router = new Router({ db, catalog, sampler: new Sampler(1) });
    const failure = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (err: unknown) => {
          const error = ConnectError.from(err);
          const detail = error.findDetails(ErrorDetailSchema)[0];
          return { code: Code[error.code], errorCode: detail?.code, field: detail?.field };
        },
      );
    expect(await failure(router.route('slow', 'any'))).toEqual({ code: 'InvalidArgument', errorCode: 'invalid_request', field: 'tier' });
    expect(await failure(router.route('', 'any'))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(router.explain('service/fast', 'any'))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(router.route('fast', 'eu-only'))).toEqual({ code: 'InvalidArgument', errorCode: 'invalid_request', field: 'routing_policy' });
    expect(await failure(router.route('balanced', 'cn-only'))).toEqual({
      code: 'FailedPrecondition',
      errorCode: 'routing_policy_violation',
      field: 'routing_policy',
    });
  });
});
