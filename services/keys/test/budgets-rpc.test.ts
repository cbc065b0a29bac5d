import { create } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { KeyService, SpendLimitService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { readKeysConfig } from '@switchboard/keys/config';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes } from '@switchboard/keys/server';
import { registerSpendLimitRoutes } from '@switchboard/keys/spend-limit-routes';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Budgets and rate limits through the keys handlers in this process, with their access rules:
 * LeaseRate, ReleaseRateLease and LeaseCap on a workspace for the data plane only, and
 * SpendLimitService for the members of the workspace (owners and admins to change it).
 */

let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const member = (role: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });
const dataPlane = () => clientAs(KeyService, { caller: 'data-plane' });
const amount = (value: string) => create(ValueSchema, { kind: { case: 'stringValue', value } });

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  clientAs = service.serve((router) => {
    registerRoutes(router, handlers);
    registerSpendLimitRoutes(router, handlers.budgets);
  });
});

afterAll(async () => {
  await handlers?.states.stop();
  await service?.stop();
});

describe('budget RPCs', () => {
  it('lease and give back rate limits, for the data plane only', async () => {
    const created = await clientAs(KeyService, member('developer')).createKey({ name: 'limited' });
    const keyId = created.key!.keyId;
    await service.runtime.db('api_keys').where({ id: keyId }).update({ max_concurrent: 2 });
    const lease = await dataPlane().leaseRate({ keyId, dimension: 'concurrency', holder: 'replica-1', used: '0', want: '5', min: '1' });
    expect(lease).toMatchObject({ granted: '2', limit: 2n, remaining: 0n, reason: '' });
    expect(lease.leaseId).toMatch(/^rte_/);
    await dataPlane().releaseRateLease({ leaseId: lease.leaseId, used: '1' });
    expect((await dataPlane().leaseRate({ keyId, dimension: 'concurrency', holder: 'replica-2', used: '0', want: '5', min: '1' })).granted).toBe('1');
    const gateway = clientAs(KeyService, { caller: 'gateway' });
    expect(await refusalOf(gateway.leaseRate({ keyId, dimension: 'requests', want: '1' }))).toMatchObject({ code: Code.PermissionDenied });
    expect(await refusalOf(gateway.releaseRateLease({ leaseId: lease.leaseId }))).toMatchObject({ code: Code.PermissionDenied });
  });

  it('read the workspace budgets for every member, change them for owners and admins, and lease them to the data plane', async () => {
    const limits = { spendLimits: [{ period: 'day', amountUsd: amount('3') }] };
    expect(await refusalOf(clientAs(SpendLimitService, member('developer')).updateWorkspaceSpendLimits(limits))).toMatchObject({
      code: Code.PermissionDenied,
    });
    const set = await clientAs(SpendLimitService, member('admin')).updateWorkspaceSpendLimits(limits);
    expect(set.spendLimits.map((s) => [s.period, s.amountUsd, s.spendUsd, s.remainingUsd])).toEqual([['day', '3', '0', '3']]);
    expect((await clientAs(SpendLimitService, member('developer')).getWorkspaceSpendLimits({})).spendLimits).toHaveLength(1);
    expect(
      await refusalOf(clientAs(SpendLimitService, member('owner')).updateWorkspaceSpendLimits({ spendLimits: [{ period: 'week', amountUsd: amount('-1') }] })),
    ).toMatchObject({ code: Code.InvalidArgument, field: 'spend_limits[0].amount_usd' });

    const lease = await dataPlane().leaseCap({ workspaceId, holder: 'replica-1', usedUsd: '0', wantUsd: '5', minUsd: '1' });
    expect(lease).toMatchObject({ grantedUsd: '3', scope: 'workspace', period: 'day', capUsd: '3', spendUsd: '0' });
    expect(lease.leaseId).toMatch(/^wsl_/);
    await dataPlane().releaseCapLease({ leaseId: lease.leaseId, usedUsd: '1' });
    // 2 came back; the released lease still holds the 1 in flight, so the share is half of it.
    expect((await dataPlane().leaseCap({ workspaceId, holder: 'replica-2', usedUsd: '0', wantUsd: '5', minUsd: '0.5' })).grantedUsd).toBe('1');
    expect(await refusalOf(dataPlane().leaseCap({ holder: 'replica-1', wantUsd: '1' }))).toMatchObject({ code: Code.InvalidArgument, field: 'key_id' });
  });
});
