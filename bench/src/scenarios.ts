import { randomBytes } from 'node:crypto';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
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

export interface RegisteredUser {
  userId: string;
  /** The user's personal workspace (created with the account). */
  workspaceId: string;
  email: string;
  accessToken: string;
}

/** Registers a fresh user through the gateway (POST /v1/auth/register). */
export async function registerUser(gatewayUrl: string, label: string): Promise<RegisteredUser> {
  const { password: _password, ...user } = await registerUserWithPassword(gatewayUrl, label);
  return user;
}

/** registerUser, also returning the password (for sign-in load). */
export async function registerUserWithPassword(gatewayUrl: string, label: string): Promise<RegisteredUser & { password: string }> {
  const suffix = `${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
  const body = {
    email: `bench-${label}-${suffix}@example.com`,
    password: `bench ${randomBytes(12).toString('base64url')} pass`,
    full_name: `Bench ${label}`,
  };
  const response = await fetch(`${gatewayUrl}/v1/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST /v1/auth/register answered ${response.status}: ${text.slice(0, 500)}`);
  const json = JSON.parse(text) as { user?: { user_id?: string; personal_workspace_id?: string }; session?: { access_token?: string } };
  if (!json.user?.user_id || !json.user.personal_workspace_id || !json.session?.access_token)
    throw new Error(`POST /v1/auth/register: no user_id, personal_workspace_id or access_token in ${text.slice(0, 500)}`);
  return {
    userId: json.user.user_id,
    workspaceId: json.user.personal_workspace_id,
    email: body.email,
    accessToken: json.session.access_token,
    password: body.password,
  };
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

/** POST /v1/keys through the gateway as the user: the new key's id and its full key (shown only in this answer). */
export async function createKey(gatewayUrl: string, accessToken: string, name: string): Promise<{ keyId: string; fullKey: string }> {
  const response = await fetch(`${gatewayUrl}/v1/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ name }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST /v1/keys answered ${response.status}: ${text.slice(0, 500)}`);
  const created = JSON.parse(text) as { full_key?: string; key?: { key_id?: string } };
  if (!created.full_key || !created.key?.key_id) throw new Error(`POST /v1/keys: no full_key or key.key_id in ${text.slice(0, 500)}`);
  return { keyId: created.key.key_id, fullKey: created.full_key };
}
