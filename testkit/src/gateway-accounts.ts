import { randomBytes } from 'node:crypto';

// Accounts and API keys made through the gateway's REST API as a user would, with plain fetch
// (no test runner): the benches, the fuzz world and the chaos load start from these.

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

/**
 * POST /v1/keys through the gateway as the user: the new key's id and its full key (shown only in
 * this answer). `fields` adds the key's other settings (monthly_spend_cap_usd, routing_policy).
 */
export async function createKey(
  gatewayUrl: string,
  accessToken: string,
  name: string,
  fields: { monthly_spend_cap_usd?: string; routing_policy?: string } = {},
): Promise<{ keyId: string; fullKey: string }> {
  const response = await fetch(`${gatewayUrl}/v1/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ name, ...fields }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  if (response.status !== 201) throw new Error(`POST /v1/keys answered ${response.status}: ${text.slice(0, 500)}`);
  const created = JSON.parse(text) as { full_key?: string; key?: { key_id?: string } };
  if (!created.full_key || !created.key?.key_id) throw new Error(`POST /v1/keys: no full_key or key.key_id in ${text.slice(0, 500)}`);
  return { keyId: created.key.key_id, fullKey: created.full_key };
}
