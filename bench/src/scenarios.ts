import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { registerUser } from '@switchboard/testkit/gateway-accounts';
import type { Target } from './measure/load.js';
import { envWholeNumber } from './measure/settings.js';

/** What a scenario's setup can use. */
export interface BenchContext {
  mesh: Mesh;
  /** The single-process baseline server (baseline-server.ts). */
  baselineUrl: string;
}

/** A baseline the mesh is compared with in a scenario. */
export interface BaselineTarget {
  name: string;
  target: Target;
  /** The one the scenario's ratio target is checked against (the same work as the mesh). */
  primary?: boolean;
}

/**
 * One load scenario. To add one, append it to `scenarios`: setup prepares data through the
 * gateway as a user would and returns the request to load the gateway with; `baselines`
 * (optional) returns the same work on the baseline server. Every target is first called once
 * and must answer 2xx before any load is sent.
 */
export interface Scenario {
  name: string;
  description: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  /** Minimum mesh req/s ÷ primary baseline req/s; reported PASS/FAIL, never a crash. */
  minRatio?: number;
  setup(ctx: BenchContext): Promise<Target>;
  baselines?(ctx: BenchContext, mesh: Target): BaselineTarget[];
}

/** BENCH_DURATION_SECONDS / BENCH_WARMUP_SECONDS shorten or lengthen every scenario. */
export const durationSeconds = envWholeNumber('BENCH_DURATION_SECONDS', 10);
export const warmupSeconds = envWholeNumber('BENCH_WARMUP_SECONDS', 2);

export const scenarios: Scenario[] = [
  {
    name: 'get-account',
    description: 'GET /v1/account with one registered user’s access token',
    connections: 64,
    durationSeconds,
    warmupSeconds,
    minRatio: 0.4,
    async setup({ mesh }) {
      const user = await registerUser(mesh.gatewayUrl, 'account');
      return { url: `${mesh.gatewayUrl}/v1/account`, method: 'GET', headers: { authorization: `Bearer ${user.accessToken}` } };
    },
    baselines: ({ baselineUrl }, mesh) => [
      { name: 'fastify+pg, token check cached like the gateway', primary: true, target: { ...mesh, url: `${baselineUrl}/v1/account` } },
      { name: 'fastify+pg, ES256 verify on every request', target: { ...mesh, url: `${baselineUrl}/verify-each/v1/account` } },
    ],
  },
];
