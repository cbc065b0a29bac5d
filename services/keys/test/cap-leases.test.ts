import { Code } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { CapLeases } from '@switchboard/keys/cap-leases';
import { readKeysConfig } from '@switchboard/keys/config';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes } from '@switchboard/keys/server';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Cap leases through the keys handlers in this process, on a schema of their own: what the data
 * plane is granted, and that the month's spend + unsettled leases + open reservations never pass
 * the cap, however many replicas ask at once.
 */

let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const developer = { caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role: 'developer' };
const dataPlane = () => clientAs(KeyService, { caller: 'data-plane' });

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(async () => {
  await handlers?.states.stop();
  await service?.stop();
});

async function newKey(cap?: string) {
  const created = await clientAs(KeyService, developer).createKey({ name: 'leased', monthlySpendCapUsd: cap });
  return { keyId: created.key!.keyId, fullKey: created.fullKey };
}

/** What counts against the key's cap now: settled spend + unexpired leases' unsettled parts + open reservations. */
async function committed(keyId: string): Promise<Money> {
  const { rows } = await service.runtime.db.raw<{ rows: Array<{ total: string }> }>(
    `SELECT (COALESCE((SELECT sum(spend_usd) FROM key_monthly_spend WHERE key_id = :key), 0)
           + COALESCE((SELECT sum(GREATEST(granted_usd - settled_usd, 0)) FROM cap_leases WHERE key_id = :key AND expires_at > now()), 0)
           + COALESCE((SELECT sum(amount_usd) FROM reservations WHERE key_id = :key AND settled_at IS NULL AND expires_at > now()), 0))::text AS total`,
    { key: keyId },
  );
  return new Money(rows[0].total);
}

const lease = (keyId: string, want: string, min: string, extra: { leaseId?: string; usedUsd?: string } = {}) =>
  dataPlane().leaseCap({ keyId, holder: 'replica-1', wantUsd: want, minUsd: min, usedUsd: '0', ...extra });

describe('cap leases', () => {
  it('grant 64 concurrent asks no more than the cap: exactly the 10 estimates it covers', async () => {
    const estimate = '0.013';
    const { keyId } = await newKey('0.130');
    const answers = await Promise.all(
      Array.from({ length: 64 }, (_, i) => dataPlane().leaseCap({ keyId, holder: `replica-${i}`, usedUsd: '0', wantUsd: estimate, minUsd: estimate })),
    );
    const granted = answers.filter((answer) => answer.leaseId !== '');
    expect(granted).toHaveLength(10);
    expect(granted.every((answer) => answer.grantedUsd === estimate)).toBe(true);
    expect(answers.filter((answer) => answer.leaseId === '').every((answer) => answer.grantedUsd === '0' && answer.capUsd === '0.130')).toBe(true);
    expect((await committed(keyId)).eq('0.13')).toBe(true);
    const refused = answers.find((answer) => answer.leaseId === '')!;
    expect(refused).toMatchObject({ reason: '', capUsd: '0.130', spendUsd: '0' });
    expect(refused.resetsAt).toBeDefined();
  });

  it('share what is left between replicas, and keep the invariant on a renewal with usage in flight', async () => {
    const { keyId, fullKey } = await newKey('1.00');
    const a = await lease(keyId, '0.6', '0.1');
    expect(a.grantedUsd).toBe('0.6');
    const b = await lease(keyId, '0.6', '0.1');
    expect(b.grantedUsd).toBe('0.2'); // half of the 0.4 left: one other lease holds room
    const renewed = await lease(keyId, '0.6', '0.1', { leaseId: a.leaseId, usedUsd: '0.5' });
    expect(renewed.leaseId).toBe(a.leaseId);
    // 0.5 in flight stays held; of the 0.3 left, half: used 0.5 + 0.15.
    expect(renewed.grantedUsd).toBe('0.65');
    expect((await committed(keyId)).lte('1.00')).toBe(true);
    // AuthorizeKey reservations count the leases too: 0.15 is left.
    expect(await dataPlane().authorizeKey({ fullKey, estimatedCostUsd: '0.16' })).toMatchObject({
      allowed: false,
      reason: 'spend_cap_exceeded',
      spendUsd: '0.85',
    });
    expect((await dataPlane().authorizeKey({ fullKey, estimatedCostUsd: '0.15' })).allowed).toBe(true);
    // With nothing left, a renewal keeps what is in flight and grants nothing more.
    const held = await lease(keyId, '0.1', '0.01', { leaseId: b.leaseId, usedUsd: '0.2' });
    expect(held).toMatchObject({ leaseId: b.leaseId, grantedUsd: '0.2', capUsd: '1.00' });
    expect((await committed(keyId)).eq('1.00')).toBe(true);
  });

  it('give back what a released lease did not use at once', async () => {
    const { keyId } = await newKey('1');
    const a = await lease(keyId, '1', '1');
    expect(a.grantedUsd).toBe('1');
    expect((await lease(keyId, '0.5', '0.5')).leaseId).toBe('');
    await dataPlane().releaseCapLease({ leaseId: a.leaseId, usedUsd: '0.1' });
    // All of the 0.9 returned is there for a replica that needs it (the 0.1 in flight stays held).
    expect((await lease(keyId, '0.9', '0.9')).grantedUsd).toBe('0.9');
    expect((await lease(keyId, '0.01', '0.01')).leaseId).toBe('');
    await dataPlane().releaseCapLease({ leaseId: 'lse_unknown', usedUsd: '0' }); // a no-op
  });

  it('give back what an expired lease did not use', async () => {
    const shortLeases = new CapLeases({ db: service.runtime.db, leaseTtlMs: 1000 });
    const { keyId } = await newKey('1');
    const answer = await shortLeases.lease({ keyId, leaseId: '', holder: 'replica-1', usedUsd: '0', wantUsd: '1', minUsd: '1' });
    expect(answer.grantedUsd).toBe('1');
    expect((await lease(keyId, '0.5', '0.5')).leaseId).toBe('');
    const after = await eventually(
      async () => {
        const next = await lease(keyId, '0.5', '0.5');
        return next.leaseId !== '' && next;
      },
      'the expired lease to give its room back',
      5000,
    );
    expect(after.grantedUsd).toBe('0.5');
    // Renewing the expired lease is a new lease.
    const renewed = await shortLeases.lease({ keyId, leaseId: answer.leaseId!, holder: 'replica-1', usedUsd: '0.2', wantUsd: '0.5', minUsd: '0.5' });
    expect(renewed.leaseId).not.toBe(answer.leaseId);
    expect(renewed.grantedUsd).toBe('0.5');
  });

  it('need no lease for a key without a cap, and refuse revoked and unknown keys', async () => {
    const { keyId } = await newKey();
    const free = await lease(keyId, '1', '0.1');
    expect(free).toMatchObject({ leaseId: '', reason: '', spendUsd: '0' });
    expect(free.capUsd).toBeUndefined();
    await clientAs(KeyService, developer).revokeKey({ keyId });
    expect(await lease(keyId, '1', '0.1')).toMatchObject({ leaseId: '', reason: 'revoked' });
    expect(await lease(newId('key'), '1', '0.1')).toMatchObject({ leaseId: '', reason: 'unknown' });
  });

  it('name the field of invalid input, and answer the data plane only', async () => {
    const { keyId } = await newKey('1');
    expect(await refusalOf(lease('', '1', '0'))).toMatchObject({ code: Code.InvalidArgument, field: 'key_id' });
    expect(await refusalOf(lease(keyId, '0', '0'))).toMatchObject({ code: Code.InvalidArgument, field: 'want_usd' });
    expect(await refusalOf(lease(keyId, '1e3', '0'))).toMatchObject({ code: Code.InvalidArgument, field: 'want_usd' });
    expect(await refusalOf(lease(keyId, '1', '2'))).toMatchObject({ code: Code.InvalidArgument, field: 'min_usd' });
    expect(await refusalOf(lease(keyId, '1', '-1'))).toMatchObject({ code: Code.InvalidArgument, field: 'min_usd' });
    expect(await refusalOf(lease(keyId, '1', '0', { usedUsd: 'x' }))).toMatchObject({ code: Code.InvalidArgument, field: 'used_usd' });
    expect(await refusalOf(dataPlane().releaseCapLease({ leaseId: '' }))).toMatchObject({ code: Code.InvalidArgument, field: 'lease_id' });
    const gateway = clientAs(KeyService, { caller: 'gateway' });
    expect(await refusalOf(gateway.leaseCap({ keyId, wantUsd: '1' }))).toMatchObject({ code: Code.PermissionDenied });
  });
});
