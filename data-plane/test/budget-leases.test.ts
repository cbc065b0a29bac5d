import { fromJson } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { readBillingConfig } from '@switchboard/billing/config';
import { prepareBilling } from '@switchboard/billing/prepare';
import { registerRoutes as billingRoutes } from '@switchboard/billing/server';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { BudgetLeases } from '@switchboard/data-plane/budget-leases';
import { balanceOwner, capOwner, rateOwner } from '@switchboard/data-plane/lease-owners';
import { readKeysConfig } from '@switchboard/keys/config';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes as keysRoutes } from '@switchboard/keys/server';
import { createPeerClient } from '@switchboard/runtime/clients';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService } from '@switchboard/runtime/in-process';
import { freePort } from '@switchboard/runtime/infra';
import { createLogger } from '@switchboard/runtime/log';
import { Money } from '@switchboard/runtime/money';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The data plane's leases (docs/money-path.md#leases) against the real owners: the keys and
 * billing handlers in this process on schemas of their own. However many requests and replicas
 * reserve at once, what they hold never passes the cap or the balance, a settled request gives
 * its unused estimate back at once, and a stopping replica gives its leases back.
 */

const log = createLogger('data-plane', 'silent');
let keys: InProcessService;
let billing: InProcessService;
let keysHandlers: ReturnType<typeof prepareKeys>;
let keysAs: ReturnType<InProcessService['serve']>;
let billingAs: ReturnType<InProcessService['serve']>;

beforeAll(async () => {
  [keys, billing] = await Promise.all([
    inProcessService('keys', new URL('../../services/keys/dist/migrations/', import.meta.url)),
    inProcessService('billing', new URL('../../services/billing/dist/migrations/', import.meta.url)),
  ]);
  keysHandlers = prepareKeys(keys.runtime, readKeysConfig({}));
  keysAs = keys.serve((router) => keysRoutes(router, keysHandlers));
  const billingHandlers = prepareBilling(billing.runtime, readBillingConfig({ BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' }));
  billingAs = billing.serve((router) => billingRoutes(router, billingHandlers));
});

afterAll(async () => {
  await keysHandlers?.states.stop();
  await Promise.all([keys?.stop(), billing?.stop()]);
});

const capLeases = (holder: string) => new BudgetLeases({ name: 'cap', log, owner: capOwner(keysAs(KeyService, { caller: 'data-plane' }), holder, 5000) });
const balanceLeases = (holder: string) =>
  new BudgetLeases({ name: 'balance', log, owner: balanceOwner(billingAs(UsageService, { caller: 'data-plane' }), holder, 5000) });

async function keyWithCap(cap: string): Promise<string> {
  return (await newKey(cap)).keyId;
}

async function newKey(cap: string) {
  const workspaceId = newId('org');
  const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };
  const created = await keysAs(KeyService, developer).createKey({ name: 'leased', monthlySpendCapUsd: cap });
  return { keyId: created.key!.keyId, revoke: () => keysAs(KeyService, developer).revokeKey({ keyId: created.key!.keyId }) };
}

/** What the owner counts against a budget now: the unexpired leases' unsettled parts. */
async function outstanding(service: InProcessService, table: 'cap_leases' | 'balance_leases', column: 'key_id' | 'workspace_id', subject: string) {
  const { rows } = await service.runtime.db.raw<{ rows: Array<{ total: string }> }>(
    `SELECT COALESCE(sum(GREATEST(granted_usd - settled_usd, 0)), 0)::text AS total FROM ${table} WHERE ${column} = ? AND expires_at > now()`,
    [subject],
  );
  return new Money(rows[0].total);
}

const estimate = new Money('0.013');

/** 64 requests at once, spread over the replicas: how many got a reservation. */
async function reserveAtOnce(replicas: BudgetLeases<unknown>[], subject: string) {
  const outcomes = await Promise.all(Array.from({ length: 64 }, (_, i) => replicas[i % replicas.length].reserve(subject, estimate)));
  return outcomes.filter((outcome) => outcome.ok);
}

describe('budget leases', () => {
  it('let exactly the requests a cap covers through, on one replica and on two', async () => {
    for (const replicas of [[capLeases('a')], [capLeases('b'), capLeases('c')]]) {
      const keyId = await keyWithCap('0.130');
      const reserved = await reserveAtOnce(replicas, keyId);
      expect(reserved).toHaveLength(10);
      expect((await outstanding(keys, 'cap_leases', 'key_id', keyId)).lte('0.13')).toBe(true);
      const refused = await replicas[0].reserve(keyId, estimate);
      expect(refused).toMatchObject({ ok: false, facts: { capUsd: '0.130', spendUsd: '0' } });
      await Promise.all(replicas.map((replica) => replica.stop()));
    }
  });

  it('lets a burst through against a cap with room to spare, whatever the first grant held: a grant is sized for every request waiting', async () => {
    // 64 at once, a first grant of 16 estimates: the 48 left wait for one more grant, never a 402.
    const replica = capLeases('burst');
    const keyId = await keyWithCap('50.00');
    expect(await reserveAtOnce([replica], keyId)).toHaveLength(64);
    expect((await outstanding(keys, 'cap_leases', 'key_id', keyId)).lte('50.00')).toBe(true);
    await replica.stop();
  });

  it('let exactly the requests a balance covers through, on two replicas', async () => {
    const workspaceId = newId('org');
    const replicas = [balanceLeases('a'), balanceLeases('b')];
    // The opening credit of 1.00 (SANDBOX_OPENING_CREDIT_USD) covers ten estimates of 0.1 and not eleven.
    const outcomes = await Promise.all(Array.from({ length: 64 }, (_, i) => replicas[i % 2].reserve(workspaceId, new Money('0.1'))));
    expect(outcomes.filter((outcome) => outcome.ok)).toHaveLength(10);
    expect((await outstanding(billing, 'balance_leases', 'workspace_id', workspaceId)).lte('1.00')).toBe(true);
    expect(outcomes.find((outcome) => !outcome.ok)).toMatchObject({ ok: false, facts: { balanceUsd: '1.00', planId: 'payg' } });
    await Promise.all(replicas.map((replica) => replica.stop()));
  });

  it('tells a workspace’s plan from its lease, asking the owner for the least lease when it holds none', async () => {
    const workspaceId = newId('org');
    const replica = balanceLeases('g');
    expect(await replica.facts(workspaceId)).toMatchObject({ planId: 'payg', balanceUsd: '1.00' });
    // The lease it asked for is the least the owner grants; requests grow it as usual.
    expect((await outstanding(billing, 'balance_leases', 'workspace_id', workspaceId)).lt('0.000001')).toBe(true);
    expect((await replica.reserve(workspaceId, new Money('0.1'))).ok).toBe(true);
    expect(await replica.facts(workspaceId)).toMatchObject({ planId: 'payg' });
    await replica.stop();
  });

  it('gives a settled estimate back at once, and the unused rest to the owner when the replica stops', async () => {
    const keyId = await keyWithCap('0.026');
    const replica = capLeases('d');
    const first = await replica.reserve(keyId, estimate);
    const second = await replica.reserve(keyId, estimate);
    expect([first.ok, second.ok]).toEqual([true, true]);
    expect((await replica.reserve(keyId, estimate)).ok).toBe(false);
    if (!first.ok || !second.ok) return;
    // A request refused after its reservation, or whose upstream failed, costs nothing.
    first.settle(new Money(0));
    const third = await replica.reserve(keyId, estimate);
    expect(third.ok).toBe(true);
    second.settle(new Money('0.001'));
    if (third.ok) third.settle(new Money('0.002'));
    await replica.stop();
    // What was used stays held until billing's usage settles it; the rest is back.
    expect((await outstanding(keys, 'cap_leases', 'key_id', keyId)).eq('0.003')).toBe(true);
  });

  it('refuses with the owner’s reason a key the owner refuses, and fails when the owner cannot be reached', async () => {
    const key = await newKey('1');
    await key.revoke();
    expect(await capLeases('e').reserve(key.keyId, estimate)).toMatchObject({ ok: false, refusal: 'revoked' });
    expect(await capLeases('e').reserve(newId('key'), estimate)).toMatchObject({ ok: false, refusal: 'unknown' });
    // Nothing listens on this port: the request cannot be decided (the front door answers 503).
    const nowhere = createPeerClient(KeyService, { name: 'keys', url: `http://127.0.0.1:${await freePort()}` }, keys.runtime.meshTokens, {
      caller: 'data-plane',
    });
    await expect(new BudgetLeases({ name: 'cap', log, owner: capOwner(nowhere, 'f', 1000) }).reserve(key.keyId, estimate)).rejects.toThrow();
  });
});

describe('a budget changed while a grant is under way', () => {
  it('gives the grant of the old limit back when it arrives and asks again under the new one', async () => {
    const workspaceId = newId('org');
    const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };
    const keyId = (await keysAs(KeyService, developer).createKey({ name: 'lowered', monthlySpendCapUsd: '1.00' })).key!.keyId;
    const owner = capOwner(keysAs(KeyService, { caller: 'data-plane' }), 'replica-a', 5000);
    let answered!: () => void;
    const held = new Promise<void>((resolve) => {
      answered = resolve;
    });
    let granted!: () => void;
    const grantMade = new Promise<void>((resolve) => {
      granted = resolve;
    });
    let first = true;
    const leases = new BudgetLeases({
      name: 'cap',
      log,
      owner: {
        ...owner,
        // The first answer (under the 1.00 cap) reaches the replica only after the cap was lowered.
        async lease(subject, request) {
          const answer = await owner.lease(subject, request);
          if (first) {
            first = false;
            granted();
            await held;
          }
          return answer;
        },
      },
    });
    const reserving = leases.reserve(keyId, estimate);
    await grantMade;
    await keysAs(KeyService, developer).updateSpendCap({ keyId, monthlySpendCapUsd: '0.02' });
    leases.forget(keyId);
    answered();
    const reservation = await reserving;
    expect(reservation.ok).toBe(true);
    // Under the new cap only one estimate fits: the old grant (sized for 16) was given back.
    expect((await leases.reserve(keyId, estimate)).ok).toBe(false);
    expect((await outstanding(keys, 'cap_leases', 'key_id', keyId)).lte('0.02')).toBe(true);
    await leases.stop();
  });
});

describe('a concurrency lease', () => {
  it('holds the slots in use while a long request runs, renewed for its time only, never growing', async () => {
    // Leases of 2 s, renewed past half their life: a 4 s request sees several renewals.
    const shortKeys = prepareKeys(keys.runtime, readKeysConfig({ LEASE_TTL: '2s' }));
    const shortAs = keys.serve((router) => keysRoutes(router, shortKeys));
    const workspaceId = newId('org');
    const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };
    const keyId = (await shortAs(KeyService, developer).createKey({ name: 'slots', rateLimits: fromJson(ValueSchema, { max_concurrent: 5 }) })).key!.keyId;
    const slots = new BudgetLeases({
      name: 'concurrency rate',
      log,
      owner: rateOwner(shortAs(KeyService, { caller: 'data-plane' }), 'replica-a', 5000, 'concurrency'),
      idleMs: 1000,
      requestsPerGrant: 1,
      renewAhead: false,
    });
    slots.start();
    try {
      const running = await slots.reserve(keyId, new Money(1));
      expect(running.ok).toBe(true);
      const held = async () => {
        const { rows } = await keys.runtime.db.raw<{ rows: Array<{ held: string }> }>(
          `SELECT COALESCE(sum(granted), 0)::text AS held FROM rate_leases WHERE budget_id = ? AND dimension = 'concurrency' AND expires_at > now()`,
          [keyId],
        );
        return Number(rows[0].held);
      };
      const renewals = await sampleFor(4_000, held);
      expect(renewals.every((slotsHeld) => slotsHeld === 1)).toBe(true);
      if (running.ok) running.settle(new Money(0));
    } finally {
      await slots.stop();
      await shortKeys.states.stop();
    }
  });
});

/** What `probe` reads every 250 ms for `ms` (an observation window, not a wait for something to happen). */
async function sampleFor(ms: number, probe: () => Promise<number>): Promise<number[]> {
  const seen: number[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    seen.push(await probe());
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return seen;
}

describe('an unlimited budget', () => {
  it('is asked again in the background while it is used, so no request waits for its owner, and left alone when idle', async () => {
    let asked = 0;
    const owner = {
      lease: async () => {
        asked += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + 1000), unlimited: true, facts: {} };
      },
      release: async () => {},
    };
    const leases = new BudgetLeases({ name: 'workspace budget', log, owner });
    leases.start();
    try {
      const waits: number[] = [];
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        const started = performance.now();
        const reserved = await leases.reserve('org_busy', new Money('0.01'));
        waits.push(performance.now() - started);
        expect(reserved).toMatchObject({ ok: true, leaseId: '', left: undefined });
        if (reserved.ok) reserved.settle(new Money('0.01'));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The first request waited for the answer; none after it did, though each answer lasts a second.
      expect(waits.slice(1).filter((ms) => ms >= 15)).toEqual([]);
      expect(asked).toBeGreaterThanOrEqual(3);
      const before = asked;
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(asked - before).toBeLessThanOrEqual(1);
      expect(leases.peek('org_busy')).toBeUndefined();
    } finally {
      await leases.stop();
    }
  }, 15_000);
});

describe('an unlimited budget whose owner cannot be reached', () => {
  it('keeps serving on the owner’s last "no limit" for a while (no limit can be set meanwhile), then is refused', async () => {
    let down = false;
    let calls = 0;
    const owner = {
      lease: async () => {
        calls += 1;
        if (down) throw new Error('connection refused');
        return { leaseId: '', grantedUsd: '0', expiresAt: new Date(Date.now() + 100), unlimited: true, facts: {} };
      },
      release: async () => {},
    };
    const leases = new BudgetLeases({ name: 'workspace budget', log, owner, unlimitedWhileOwnerDownMs: 400 });
    expect(await leases.reserve('org_down', new Money('0.01'))).toMatchObject({ ok: true });
    down = true;
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Past its trust, the owner down: still served.
    expect(await leases.reserve('org_down', new Money('0.01'))).toMatchObject({ ok: true, leaseId: '' });
    // The owner known to be away, the next request is served without waiting for a call of its own.
    const before = calls;
    expect(await leases.reserve('org_down', new Money('0.01'))).toMatchObject({ ok: true, leaseId: '' });
    expect(calls).toBe(before);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await expect(leases.reserve('org_down', new Money('0.01'))).rejects.toThrow('connection refused');
    // A budget the owner never answered for is never served on a guess.
    const limited = new BudgetLeases({ name: 'cap', log, owner: { ...owner, lease: async () => Promise.reject(new Error('connection refused')) } });
    await expect(limited.reserve('key_down', new Money('0.01'))).rejects.toThrow('connection refused');
  });
});
