import { createHash } from 'node:crypto';
import { Code } from '@connectrpc/connect';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { readKeysConfig } from '@switchboard/keys/config';
import { prepareKeys } from '@switchboard/keys/prepare';
import { registerRoutes } from '@switchboard/keys/server';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The keys handlers in this process (createRouterTransport), built as main.ts builds them on a
 * schema of their own: how each RPC maps the caller, the input and the domain's answers.
 */

let service: InProcessService;
let handlers: ReturnType<typeof prepareKeys>;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const member = (role: string, userId = newId('usr')) => ({ caller: 'gateway', principalId: userId, principalType: 'user' as const, workspaceId, role });

beforeAll(async () => {
  service = await inProcessService('keys', new URL('../dist/migrations/', import.meta.url));
  handlers = prepareKeys(service.runtime, readKeysConfig({}));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(async () => {
  await handlers?.states.stop();
  await service?.stop();
});

describe('the keys handlers', () => {
  it('create, read and revoke a key of the caller’s workspace', async () => {
    const keys = clientAs(KeyService, member('developer'));
    const created = await keys.createKey({ name: 'ci', monthlySpendCapUsd: '5' });
    expect(created.fullKey).toMatch(/^sb_/);
    expect(created.key).toMatchObject({ name: 'ci', monthlySpendCapUsd: '5', status: 'active' });
    const keyId = created.key!.keyId;
    expect((await keys.getKey({ keyId })).name).toBe('ci');
    expect((await keys.listKeys({})).data.map((key) => key.keyId)).toContain(keyId);
    expect((await keys.revokeKey({ keyId })).status).toBe('revoked');
  });

  it('name the field of invalid input', async () => {
    const keys = clientAs(KeyService, member('developer'));
    expect(await refusalOf(keys.createKey({ name: '  ' }))).toEqual({ code: Code.InvalidArgument, error: 'invalid_request', field: 'name' });
    expect(await refusalOf(keys.createKey({ name: 'k', monthlySpendCapUsd: 'lots' }))).toMatchObject({
      code: Code.InvalidArgument,
      field: 'monthly_spend_cap_usd',
    });
  });

  it('answer 404 for another workspace’s key and 403 for a developer changing another’s key', async () => {
    const { key } = await clientAs(KeyService, member('developer')).createKey({ name: 'theirs' });
    const stranger = clientAs(KeyService, { ...member('owner'), workspaceId: newId('org') });
    expect(await refusalOf(stranger.getKey({ keyId: key!.keyId }))).toEqual({ code: Code.NotFound, error: 'key_not_found', field: '' });
    const colleague = clientAs(KeyService, member('developer'));
    expect(await refusalOf(colleague.revokeKey({ keyId: key!.keyId }))).toMatchObject({ code: Code.PermissionDenied, error: 'forbidden' });
    expect((await clientAs(KeyService, member('admin')).revokeKey({ keyId: key!.keyId })).status).toBe('revoked');
  });

  it('keep internal RPCs to their callers', async () => {
    const gateway = clientAs(KeyService, { caller: 'gateway' });
    expect(await refusalOf(gateway.describeKey({ keyId: 'key_x' }))).toMatchObject({ code: Code.PermissionDenied, error: 'forbidden' });
    const billing = clientAs(KeyService, { caller: 'billing' });
    expect(await refusalOf(billing.describeKey({ keyId: '' }))).toMatchObject({ code: Code.InvalidArgument, field: 'key_id' });
  });

  it('list key states by version, in pages, a revocation bumping the version and a use not', async () => {
    const dataPlane = clientAs(KeyService, { caller: 'data-plane' });
    const keys = clientAs(KeyService, member('developer'));
    let head = 0n;
    for (let more = true; more; ) {
      const page = await dataPlane.listKeyStates({ afterVersion: head, limit: 5000 });
      head = page.version;
      more = page.hasMore;
    }
    const created = [];
    for (const name of ['a', 'b', 'c'])
      created.push(await keys.createKey({ name, monthlySpendCapUsd: name === 'a' ? '2.50' : undefined, routingPolicy: 'cn-only' }));

    const first = await dataPlane.listKeyStates({ afterVersion: head, limit: 2 });
    expect(first.hasMore).toBe(true);
    expect(first.states.map((state) => state.keyId)).toEqual(created.slice(0, 2).map((c) => c.key!.keyId));
    expect(first.states[0]).toMatchObject({
      keyHash: createHash('sha256').update(created[0].fullKey).digest('hex'),
      workspaceId,
      status: 'active',
      monthlySpendCapUsd: '2.50',
      routingPolicy: 'cn-only',
    });
    expect(first.states[1].monthlySpendCapUsd).toBeUndefined();
    expect(first.version).toBe(first.states[1].version);
    expect(first.states[1].version).toBeGreaterThan(first.states[0].version);
    const second = await dataPlane.listKeyStates({ afterVersion: first.version, limit: 2 });
    expect(second).toMatchObject({ hasMore: false, states: [{ keyId: created[2].key!.keyId }] });
    const unchanged = await dataPlane.listKeyStates({ afterVersion: second.version });
    expect(unchanged).toMatchObject({ states: [], version: second.version, hasMore: false });

    expect((await dataPlane.authorizeKey({ fullKey: created[1].fullKey })).allowed).toBe(true); // marks the key used
    await keys.revokeKey({ keyId: created[0].key!.keyId });
    const afterRevocation = await dataPlane.listKeyStates({ afterVersion: second.version });
    expect(afterRevocation.states.map((state) => [state.keyId, state.status])).toEqual([[created[0].key!.keyId, 'revoked']]);
    expect(afterRevocation.version).toBeGreaterThan(second.version);

    expect(await refusalOf(dataPlane.listKeyStates({ limit: 5001 }))).toMatchObject({ code: Code.InvalidArgument, field: 'limit' });
    expect(await refusalOf(dataPlane.listKeyStates({ afterVersion: -1n }))).toMatchObject({ code: Code.InvalidArgument, field: 'after_version' });
    expect(await refusalOf(clientAs(KeyService, { caller: 'gateway' }).listKeyStates({}))).toMatchObject({ code: Code.PermissionDenied });
  });
});
