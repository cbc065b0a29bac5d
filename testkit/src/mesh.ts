import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Mesh, type MeshOptions, startMesh } from '@switchboard/runtime/dev/mesh';
import { afterAll, beforeAll, expect } from 'vitest';
import { expectSuccessKeepsContract } from './contract-check.js';
import { relaxedRateLimits } from './rate-limits.js';

/**
 * The hourly action limits of identity, raised for suites that sign up hundreds of users from
 * one address; the tests of the limits themselves pass the defaults back.
 */
export const relaxedActionLimits: Record<string, string> = {
  REGISTRATIONS_PER_IP_PER_HOUR: '100000',
  ORGANIZATIONS_PER_USER_PER_HOUR: '100000',
  ORGANIZATIONS_PER_IP_PER_HOUR: '100000',
  INVITATIONS_PER_USER_PER_HOUR: '100000',
  INVITATIONS_PER_IP_PER_HOUR: '100000',
};

/**
 * What the tests' billing runs with unless a test says otherwise, as under `npm start`: the
 * sandbox provider, and every new account opened with 1.00 (as if a sandbox checkout of 1.00 had
 * been paid), so a new user can make requests without verifying an email first
 * (docs/api/billing.md#free-credit-and-the-sandbox).
 */
export const sandboxBilling: Record<string, string> = {
  BILLING_SANDBOX: 'true',
  SANDBOX_OPENING_CREDIT_USD: '1.00',
};

/** Boots the whole mesh (every service and the gateway) on free ports for one test file; `componentEnv` adds to one component's environment. */
export async function bootMesh(env: Record<string, string> = {}, componentEnv?: MeshOptions['componentEnv']): Promise<Mesh> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-mesh-'));
  return startMesh({
    dataDir,
    randomPorts: true,
    allowContainers: true,
    componentEnv,
    env: { LOG_LEVEL: 'info', ...relaxedActionLimits, ...relaxedRateLimits, ...sandboxBilling, ...env },
  });
}

/** The mesh of one test file and a REST client of its gateway, filled in once the mesh has booted. */
export interface MeshSuite {
  mesh: Mesh;
  call: RestCall;
}

/**
 * Boots the mesh for the calling test file (its beforeAll) and stops it after the file's tests
 * (its afterAll). The fields are read in tests and later hooks, not at module load: they are set
 * by the boot. `env` is read then too, so it may name what an earlier beforeAll started.
 */
export function meshSuiteOfFile(env: () => Record<string, string> | Promise<Record<string, string>> = () => ({})): MeshSuite {
  const suite = {} as MeshSuite;
  beforeAll(async () => {
    suite.mesh = await bootMesh(await env());
    suite.call = restClient(suite.mesh.gatewayUrl);
  });
  afterAll(async () => {
    await suite.mesh?.stop();
  });
  return suite;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a test reads whatever JSON the route answers.
  json: any;
}

/** A REST client for the gateway, the way a user's code would call it; every successful answer is checked against its operation's contract. */
export function restClient(gatewayUrl: string) {
  return async function call(
    method: string,
    pathname: string,
    options: { body?: unknown; rawBody?: string | Buffer; token?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${gatewayUrl}${pathname}`, { method, headers, body, signal: AbortSignal.timeout(15_000) });
    const text = await response.text();
    expectSuccessKeepsContract(method, `${gatewayUrl}${pathname}`, { status: response.status, headers: response.headers, text });
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  };
}

export type RestCall = ReturnType<typeof restClient>;

/** The same client acting from address `ip` (for a gateway that trusts one proxy hop). */
export function fromAddress(call: RestCall, ip: string): RestCall {
  return (method, pathname, options = {}) => call(method, pathname, { ...options, headers: { 'x-forwarded-for': ip, ...options.headers } });
}

let counter = 0;
/** A unique, valid registration for tests. */
export function newUser() {
  counter += 1;
  return {
    email: `user${Date.now().toString(36)}${counter}@example.com`,
    password: `correct horse battery ${counter} staple`,
    full_name: `Test User ${counter}`,
  };
}

/** A newly registered user: its access token, ids and credentials. */
export interface SignedUp {
  token: string;
  userId: string;
  workspaceId: string;
  email: string;
  password: string;
}

/** Registers a new user through REST (201 asserted). */
export async function signUp(call: RestCall): Promise<SignedUp> {
  const registration = newUser();
  const response = await call('POST', '/v1/auth/register', { body: registration });
  expect(response.status, response.text).toBe(201);
  return {
    token: response.json.session.access_token,
    userId: response.json.user.user_id,
    workspaceId: response.json.user.personal_workspace_id,
    email: registration.email,
    password: registration.password,
  };
}

/** The fields of a key record (docs/api/keys.md#the-key-record), sorted. */
export const keyRecordFields = [
  'key_id',
  'name',
  'hint',
  'status',
  'monthly_spend_cap_usd',
  'month_to_date_spend_usd',
  'alert_webhook_url',
  'alert_threshold_pct',
  'alert_thresholds_pct',
  'routing_policy',
  'created_by',
  'created_at',
  'last_used_at',
  'revoked_at',
  'scopes',
  'expires_at',
  'allowed_models',
  'rate_limits',
  'spend_limits',
  'rotated_from',
].sort();

/** Creates an API key through REST (201 asserted): the full key, shown once, and the record. */
export async function createKey(
  call: RestCall,
  token: string,
  body: Record<string, unknown> = { name: 'ci' },
): Promise<{ fullKey: string; key: Record<string, unknown> }> {
  const response = await call('POST', '/v1/keys', { token, body });
  expect(response.status, response.text).toBe(201);
  return { fullKey: response.json.full_key, key: response.json.key };
}

let topupCounter = 0;
/**
 * Funds a workspace as a newcomer would (docs/api/billing.md#free-credit-and-the-sandbox): a top-up
 * paid on the sandbox provider, which the test meshes run. `workspaceId` picks an organization;
 * the default is the token's personal workspace.
 */
export async function topUp(call: RestCall, token: string, amountUsd: string, workspaceId?: string): Promise<void> {
  topupCounter += 1;
  const headers = workspaceId ? { 'x-workspace-id': workspaceId } : undefined;
  const body = { amount_usd: amountUsd, idempotency_key: `test-top-up-${Date.now().toString(36)}-${topupCounter}` };
  const started = await call('POST', '/v1/billing/topup', { token, body, headers });
  expect(started.status, started.text).toBe(201);
  const paid = await fetch(`${started.json.checkout_url}/complete`, { method: 'POST', signal: AbortSignal.timeout(15_000) });
  expect(paid.status, await paid.text()).toBe(200);
}

/** Asserts the error body of docs/conventions.md#errors: status, code, field, and the request id of the response. */
export function expectErrorBody(response: ApiResponse, status: number, code?: string, field?: string | null) {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('x-request-id')).toBeTruthy();
  expect(response.json?.error).toMatchObject({ message: expect.any(String), request_id: response.headers.get('x-request-id') });
  expect(typeof response.json.error.code).toBe('string');
  expect('field' in response.json.error).toBe(true);
  if (code) expect(response.json.error.code).toBe(code);
  if (field !== undefined) expect(response.json.error.field).toBe(field);
}
