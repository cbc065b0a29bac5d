import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { readBillingConfig } from '@switchboard/billing/config';
import { prepareBilling } from '@switchboard/billing/prepare';
import { registerRoutes } from '@switchboard/billing/server';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Balance leases through billing's handlers (in-process, built as main.ts builds them, on the test
 * Postgres): concurrent grants never hold more than the balance, renewals keep what is in flight,
 * releases give back the rest, and an expired lease holds nothing. Workspaces open with 1.00 (the
 * sandbox's SANDBOX_OPENING_CREDIT_USD), opened by their first lease.
 */

let service: InProcessService;
let usage: ReturnType<typeof clients>;
let shortLived: ReturnType<typeof clients>;

function clients(leaseTtl: string) {
  const handlers = prepareBilling(service.runtime, readBillingConfig({ LEASE_TTL: leaseTtl, BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '1.00' }));
  const clientAs = service.serve((router) => registerRoutes(router, handlers));
  return { dataPlane: clientAs(UsageService, { caller: 'data-plane' }), gateway: clientAs(UsageService, { caller: 'gateway' }) };
}

beforeAll(async () => {
  service = await inProcessService('billing', new URL('../dist/migrations/', import.meta.url));
  usage = clients('30s');
  shortLived = clients('1s');
});

afterAll(() => service?.stop());

/** What the workspace's unexpired leases hold of its balance, and the balance. */
async function held(workspaceId: string): Promise<{ balance: Money; outstanding: Money }> {
  const { rows } = await service.runtime.db.raw<{ rows: Array<{ balance_usd: string; outstanding_usd: string }> }>(
    `SELECT a.balance_usd::text, COALESCE((SELECT sum(GREATEST(granted_usd - settled_usd, 0)) FROM balance_leases l
        WHERE l.workspace_id = a.workspace_id AND l.expires_at > now()), 0)::text AS outstanding_usd
       FROM accounts a WHERE a.workspace_id = ?`,
    [workspaceId],
  );
  return { balance: new Money(rows[0].balance_usd), outstanding: new Money(rows[0].outstanding_usd) };
}

const lease = (workspaceId: string, fields: { leaseId?: string; holder?: string; usedUsd?: string; wantUsd: string; minUsd: string }) =>
  usage.dataPlane.leaseBalance({ workspaceId, holder: 'replica-a', ...fields });

describe('balance leases', () => {
  it('grant 64 concurrent requests for one estimate each exactly what the balance covers: 10 of 0.1 from 1.00', async () => {
    const workspaceId = newId('org');
    const answers = await Promise.all(
      Array.from({ length: 64 }, (_, i) => lease(workspaceId, { holder: `replica-${i}`, usedUsd: '0', wantUsd: '0.1', minUsd: '0.1' })),
    );
    const granted = answers.filter((answer) => answer.leaseId !== '');
    expect(granted).toHaveLength(10);
    expect(new Set(granted.map((answer) => answer.leaseId)).size).toBe(10);
    expect(granted.every((answer) => answer.grantedUsd === '0.1' && answer.leaseId.startsWith('lse_'))).toBe(true);
    // The refused hold nothing and say why: the balance (never debited here) and what prices apply.
    for (const answer of answers) expect(answer).toMatchObject({ balanceUsd: '1.00', planId: 'payg', pricingVersion: '2026-11-01' });
    expect(answers.filter((answer) => answer.leaseId === '').every((answer) => answer.grantedUsd === '0' && !answer.expiresAt)).toBe(true);
    const { balance, outstanding } = await held(workspaceId);
    expect(outstanding.toFixed()).toBe('1');
    expect(balance.toFixed()).toBe('1');
  });

  it('share what is left fairly, keep what a renewal has in flight, and take back what a release did not use', async () => {
    const workspaceId = newId('org');
    const a = await lease(workspaceId, { wantUsd: '0.5', minUsd: '0.1' });
    expect(a.grantedUsd).toBe('0.5');
    // 0.5 left, one other holder: a share of 0.25, above the 0.1 minimum.
    const b = await lease(workspaceId, { holder: 'replica-b', wantUsd: '1', minUsd: '0.1' });
    expect(b.grantedUsd).toBe('0.25');
    // A used 0.3 (unsettled: it stays held); room 1 − 0.25 − 0.3 = 0.45, halved: 0.225 more.
    const renewed = await lease(workspaceId, { leaseId: a.leaseId, usedUsd: '0.3', wantUsd: '0.5', minUsd: '0.1' });
    expect(renewed.leaseId).toBe(a.leaseId);
    expect(renewed.grantedUsd).toBe('0.525');
    expect(timestampDate(renewed.expiresAt!).getTime()).toBeGreaterThanOrEqual(timestampDate(a.expiresAt!).getTime());
    // Claiming to have used more than was granted holds no more than the grant (0.525): room 0.225, halved.
    const overclaimed = await lease(workspaceId, { leaseId: a.leaseId, usedUsd: '5', wantUsd: '0.5', minUsd: '0.1' });
    expect(overclaimed.grantedUsd).toBe('0.6375');
    let { balance, outstanding } = await held(workspaceId);
    expect(balance.minus(outstanding).gte(0)).toBe(true);
    // A release keeps the used part (in flight until settled) and returns the rest at once.
    await usage.dataPlane.releaseBalanceLease({ leaseId: a.leaseId, usedUsd: '0.3' });
    ({ outstanding } = await held(workspaceId));
    expect(outstanding.toFixed()).toBe('0.55');
    // A release never grows a lease, and an unknown lease is no error.
    await usage.dataPlane.releaseBalanceLease({ leaseId: a.leaseId, usedUsd: '0.9' });
    await usage.dataPlane.releaseBalanceLease({ leaseId: newId('lse'), usedUsd: '0' });
    expect((await held(workspaceId)).outstanding.toFixed()).toBe('0.55');
    // 0.45 left over two holders: 0.15 for a third.
    const c = await lease(workspaceId, { holder: 'replica-c', wantUsd: '1', minUsd: '0.1' });
    expect(c.grantedUsd).toBe('0.15');
    // Less left than the minimum: nothing, and no lease.
    const refused = await lease(workspaceId, { holder: 'replica-d', wantUsd: '1', minUsd: '0.4' });
    expect(refused).toMatchObject({ leaseId: '', grantedUsd: '0' });
  });

  it('hold nothing once expired: the balance is free again, and renewing an expired lease starts a new one', async () => {
    const workspaceId = newId('org');
    const first = await shortLived.dataPlane.leaseBalance({ workspaceId, holder: 'replica-a', usedUsd: '0', wantUsd: '1', minUsd: '1' });
    expect(first.grantedUsd).toBe('1');
    expect((await shortLived.dataPlane.leaseBalance({ workspaceId, holder: 'replica-b', usedUsd: '0', wantUsd: '0.1', minUsd: '0.1' })).leaseId).toBe('');
    const second = await eventually(async () => {
      const answer = await shortLived.dataPlane.leaseBalance({ workspaceId, holder: 'replica-b', usedUsd: '0', wantUsd: '0.5', minUsd: '0.5' });
      return answer.leaseId !== '' && answer;
    }, 'the first lease to expire');
    expect(second.grantedUsd).toBe('0.5');
    // What the holder says it used of the expired lease no longer counts: a new lease, from zero.
    const renewed = await shortLived.dataPlane.leaseBalance({
      workspaceId,
      leaseId: first.leaseId,
      holder: 'replica-a',
      usedUsd: '0.2',
      wantUsd: '0.5',
      minUsd: '0.1',
    });
    expect(renewed.leaseId).not.toBe(first.leaseId);
    expect(renewed.leaseId).not.toBe('');
    // 0.5 left (if `second` is still live) shared with its holder, or all of it once it expired too.
    expect(['0.25', '0.5']).toContain(renewed.grantedUsd);
  });

  it('name the field of invalid input, and answer the data plane only', async () => {
    const valid = { workspaceId: newId('org'), holder: 'replica-a', usedUsd: '0', wantUsd: '0.1', minUsd: '0.1' };
    const refused = async (fields: Partial<typeof valid> & { leaseId?: string }) =>
      (await refusalOf(usage.dataPlane.leaseBalance({ ...valid, ...fields }))).field;
    expect(await refused({ workspaceId: '' })).toBe('workspace_id');
    expect(await refused({ holder: '' })).toBe('holder');
    expect(await refused({ leaseId: 'x'.repeat(201) })).toBe('lease_id');
    expect(await refused({ usedUsd: '-1' })).toBe('used_usd');
    expect(await refused({ wantUsd: '' })).toBe('want_usd');
    expect(await refused({ wantUsd: '0' })).toBe('want_usd');
    expect(await refused({ wantUsd: '1e3' })).toBe('want_usd');
    expect(await refused({ minUsd: '0.2' })).toBe('min_usd');
    expect((await refusalOf(usage.dataPlane.releaseBalanceLease({ leaseId: '', usedUsd: '0' }))).field).toBe('lease_id');
    expect((await refusalOf(usage.dataPlane.releaseBalanceLease({ leaseId: 'lse_x', usedUsd: '0.1.2' }))).field).toBe('used_usd');
    expect(await refusalOf(usage.gateway.leaseBalance(valid))).toMatchObject({ code: Code.PermissionDenied });
    expect(await refusalOf(usage.gateway.releaseBalanceLease({ leaseId: 'lse_x' }))).toMatchObject({ code: Code.PermissionDenied });
  });
});
