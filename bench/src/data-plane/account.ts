import { randomBytes } from 'node:crypto';
import { catalogPrice, fastModels, passthroughModel } from './settings.js';

export function catalogJson(baseUrl: string): string {
  const model = (id: string, region: string, tiers: string[]) => ({ id, region, tiers, input_usd_per_1m: catalogPrice, output_usd_per_1m: catalogPrice });
  return JSON.stringify(
    {
      regions: {
        overseas: { base_url: baseUrl, api_key_env: 'BENCH_UPSTREAM_KEY' },
        cn: { base_url: baseUrl, api_key_env: 'BENCH_UPSTREAM_KEY' },
      },
      models: [
        model(passthroughModel, 'overseas', []),
        model(fastModels[0], 'overseas', ['fast']),
        model(fastModels[1], 'cn', ['fast']),
        model('bench-balanced', 'overseas', ['balanced']),
      ],
    },
    null,
    2,
  );
}

async function getJson(url: string, token: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(15_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

export const balanceOf = async (gatewayUrl: string, token: string) => String((await getJson(`${gatewayUrl}/v1/billing/balance`, token)).balance_usd);
export const spendOf = async (gatewayUrl: string, token: string, keyId: string) =>
  String((await getJson(`${gatewayUrl}/v1/keys/${keyId}`, token)).month_to_date_spend_usd ?? '0');

/** A top-up through the sandbox checkout, as the README walks through it. */
/**
 * A key of the account with every limit of docs/api/keys.md set, each far above what the bench
 * can reach (nothing is refused): inference only, an expiry years ahead, an allow-list its models
 * match, rate limits of every dimension and a spend limit of every period. Its requests go
 * through every check and lease of the front door (docs/api/front-door.md#order-of-checks).
 */
export async function createLimitedKey(gatewayUrl: string, token: string): Promise<{ keyId: string; fullKey: string }> {
  const send = async (method: string, url: string, body: unknown, status: number) => {
    const response = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    if (response.status !== status) throw new Error(`${method} ${url} answered ${response.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const created = (await send(
    'POST',
    `${gatewayUrl}/v1/keys`,
    {
      name: 'bench data plane, every limit',
      scopes: ['inference'],
      expires_at: new Date(Date.now() + 5 * 365 * 24 * 3600_000).toISOString(),
      allowed_models: ['bench-*', 'service/*'],
      rate_limits: { requests_per_minute: 1_000_000_000, tokens_per_minute: 1_000_000_000, max_concurrent: 1_000_000 },
    },
    201,
  )) as { full_key: string; key: { key_id: string } };
  const huge = '1000000';
  await send(
    'PUT',
    `${gatewayUrl}/v1/keys/${created.key.key_id}/spend-limits`,
    { spend_limits: ['day', 'week', 'month', 'total'].map((period) => ({ period, amount_usd: huge })) },
    200,
  );
  return { keyId: created.key.key_id, fullKey: created.full_key };
}

export async function topUp(gatewayUrl: string, token: string, amountUsd: string): Promise<void> {
  const created = await fetch(`${gatewayUrl}/v1/billing/topup`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount_usd: amountUsd, idempotency_key: `bench-${randomBytes(6).toString('hex')}` }),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await created.text();
  if (created.status !== 201) throw new Error(`POST /v1/billing/topup answered ${created.status}: ${text.slice(0, 500)}`);
  const checkoutUrl = (JSON.parse(text) as { checkout_url?: string }).checkout_url;
  if (!checkoutUrl) throw new Error(`POST /v1/billing/topup: no checkout_url in ${text.slice(0, 500)}`);
  // The page's Pay button, on this gateway (checkout_url names PUBLIC_BASE_URL's host).
  const paid = await fetch(`${gatewayUrl}${new URL(checkoutUrl).pathname}/complete`, { method: 'POST', signal: AbortSignal.timeout(15_000) });
  const paidText = await paid.text();
  if (paid.status !== 200 || (JSON.parse(paidText) as { status?: string }).status !== 'completed')
    throw new Error(`completing the sandbox checkout answered ${paid.status}: ${paidText.slice(0, 500)}`);
}
