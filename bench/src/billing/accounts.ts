import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { Money } from '@switchboard/runtime/money';
import { createKey, registerUser } from '@switchboard/testkit/gateway-accounts';
import { pollUntil } from '../measure/loop.js';
import { pollIntervalMs } from './settings.js';

export interface Account {
  token: string;
  workspaceId: string;
  keyId: string;
  /** Sum of the costs answered for the key so far (JetStream-acked usage records and RecordUsage calls). */
  recorded: Money;
  /** Usages answered for the key so far. */
  calls: number;
}

/** GET /v1/keys/{id}: the key's month-to-date spend as the keys service has it. */
async function monthToDate(gatewayUrl: string, account: Account): Promise<string> {
  const response = await fetch(`${gatewayUrl}/v1/keys/${account.keyId}`, {
    headers: { authorization: `Bearer ${account.token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET /v1/keys/${account.keyId} answered ${response.status}: ${text.slice(0, 500)}`);
  const spend = (JSON.parse(text) as { month_to_date_spend_usd?: string }).month_to_date_spend_usd;
  if (typeof spend !== 'string') throw new Error(`GET /v1/keys/${account.keyId}: no month_to_date_spend_usd in ${text.slice(0, 500)}`);
  return spend;
}

/**
 * Waits until the keys service's spend of every key equals what was recorded for it, one key at a
 * time with one request in flight (the usages went to the keys in turn and the keys service
 * applies them in order, so while the first key completes the others do too): the time
 * (performance.now()) the last key was seen complete. A backlog may take long to apply, so what
 * fails is a spend that stopped moving (pollUntil). A spend above the recorded sum is an error
 * at once (something counted twice).
 */
export async function waitUntilVisible(gatewayUrl: string, accounts: Account[], settings: { stallTimeoutMs: number; maxWaitMs: number }): Promise<number> {
  const started = performance.now();
  let seenAt = started;
  for (const [i, account] of accounts.entries()) {
    const complete = (spend: string) => {
      if (new Money(spend).gt(account.recorded))
        throw new Error(`key ${account.keyId}: the keys service shows ${spend} USD, more than the ${account.recorded.toFixed()} recorded`);
      return new Money(spend).eq(account.recorded);
    };
    seenAt = await pollUntil(
      () => monthToDate(gatewayUrl, account),
      complete,
      { intervalMs: pollIntervalMs, stallTimeoutMs: settings.stallTimeoutMs, deadline: started + settings.maxWaitMs },
      (spend, stillMs) =>
        `after ${Math.round(performance.now() - started)} ms (the spend unchanged for the last ${stillMs} ms) the keys service shows ${spend} USD of the ${account.recorded.toFixed()} recorded for key ${account.keyId} (${accounts.length - i} keys not complete yet)`,
    );
  }
  return seenAt;
}

/** `count` users registered through the gateway, each with a key in its personal workspace (POST /v1/keys). */
export async function createAccounts(mesh: Mesh, count: number): Promise<Account[]> {
  const accounts: Account[] = [];
  for (let i = 0; i < count; i++) {
    const user = await registerUser(mesh.gatewayUrl, `billing${i}`);
    const { keyId } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench billing');
    accounts.push({ token: user.accessToken, workspaceId: user.workspaceId, keyId, recorded: new Money(0), calls: 0 });
  }
  return accounts;
}
