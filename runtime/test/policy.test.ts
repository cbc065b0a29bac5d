import type { DescMethod, DescService } from '@bufbuild/protobuf';
import { Code, type ConnectError, type ContextValues, createContextValues } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { callerKey } from '../src/call-context.js';
import type { MeshClaims } from '../src/mesh-token.js';
import { type Action, allows, assertRpcRules, authorize, guardRpc, mayGrant, mayManageMember, permissions, roles, rpcRules } from '../src/policy.js';

/** The SPEC §3 permission table, row by row, as the policy module encodes it. */
const table: Array<[string, Action[], Record<(typeof roles)[number], boolean>]> = [
  [
    'conversations, messages, feedback',
    ['conversations.read', 'conversations.write', 'feedback.read', 'feedback.write'],
    { owner: true, admin: true, developer: true },
  ],
  ['create keys', ['keys.create', 'keys.read'], { owner: true, admin: true, developer: true }],
  ['change or revoke any key', ['keys.manage'], { owner: true, admin: true, developer: false }],
  ['billing reads', ['billing.read'], { owner: true, admin: true, developer: true }],
  ['top-up / checkout', ['billing.topup'], { owner: true, admin: true, developer: false }],
  ['webhooks', ['webhooks.read', 'webhooks.manage'], { owner: true, admin: true, developer: false }],
  [
    'invite, remove members; change roles',
    ['members.invite', 'members.remove', 'members.update_role', 'invitations.read', 'invitations.revoke'],
    { owner: true, admin: true, developer: false },
  ],
  ['transfer ownership, delete organization', ['organization.transfer_ownership', 'organization.delete'], { owner: true, admin: false, developer: false }],
  ['read the organization and its members; leave it', ['organization.read', 'members.read', 'members.leave'], { owner: true, admin: true, developer: true }],
];

describe('the permission table', () => {
  for (const [row, actions, expected] of table) {
    it(row, () => {
      for (const action of actions) for (const role of roles) expect(allows(role, action), `${role} ${action}`).toBe(expected[role]);
    });
  }

  it('covers every action', () => {
    expect(new Set(table.flatMap(([, actions]) => actions))).toEqual(new Set(Object.keys(permissions)));
  });

  it('lets a developer change or revoke its own keys only', () => {
    expect(allows('developer', 'keys.manage', true)).toBe(true);
    expect(allows('developer', 'keys.manage', false)).toBe(false);
  });

  it('refuses unknown or missing roles', () => {
    expect(allows(undefined, 'conversations.read')).toBe(false);
    expect(allows('superuser', 'conversations.read')).toBe(false);
  });

  it('grants roles at or below the granter, never owner; nobody manages the owner', () => {
    expect(mayGrant('admin', 'admin')).toBe(true);
    expect(mayGrant('admin', 'developer')).toBe(true);
    expect(mayGrant('developer', 'admin')).toBe(false);
    expect(mayGrant('owner', 'owner')).toBe(false);
    expect(mayManageMember('admin', 'owner')).toBe(false);
    expect(mayManageMember('admin', 'admin')).toBe(true);
    expect(mayManageMember('owner', 'developer')).toBe(true);
  });
});

describe('the RPC rules', () => {
  it('name every RPC of the mesh, and nothing else', async () => {
    const modules = await Promise.all([
      import('@switchboard/contracts/switchboard/identity/v1/identity_pb'),
      import('@switchboard/contracts/switchboard/keys/v1/keys_pb'),
      import('@switchboard/contracts/switchboard/billing/v1/billing_pb'),
      import('@switchboard/contracts/switchboard/conversations/v1/conversations_pb'),
      import('@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb'),
    ]);
    const services = modules.flatMap((module) => Object.values(module).filter((value): value is DescService => (value as DescService)?.kind === 'service'));
    const methods = services.flatMap((service) => service.methods);
    expect(methods.length).toBeGreaterThan(60);
    expect(() => assertRpcRules(methods)).not.toThrow();
    expect(new Set(Object.keys(rpcRules))).toEqual(new Set(methods.map((m) => `${m.parent.typeName}/${m.name}`)));
    // Handler rules name real actions.
    for (const rule of Object.values(rpcRules)) {
      if (rule.kind === 'handler') for (const action of rule.actions) expect(permissions).toHaveProperty([action]);
    }
  });

  it('refuse to start a server with an RPC without a rule', async () => {
    const { Health } = await import('@switchboard/contracts/grpc/health/v1/health_pb');
    expect(() => assertRpcRules(Health.methods)).toThrow(/no authorization rule for grpc.health.v1.Health\/Check/);
  });
});

describe('guardRpc', () => {
  async function run(rpc: string, claims: MeshClaims, handler: (ctx: { values: ContextValues }) => void = () => undefined) {
    const [service, methodName] = rpc.split('/');
    const contextValues = createContextValues();
    contextValues.set(callerKey, claims);
    const method = { name: methodName, parent: { typeName: service } } as unknown as DescMethod;
    return guardRpc(method, contextValues, async () => {
      handler({ values: contextValues });
      return {};
    });
  }
  const code = async (promise: Promise<unknown>) =>
    promise.then(
      () => 'ok',
      (err: ConnectError) => Code[err.code],
    );
  const developer: MeshClaims = { caller: 'gateway', principalId: 'usr_1', principalType: 'user', workspaceId: 'org_1', role: 'developer' };

  it('decides workspace rules on the mesh token role before the handler', async () => {
    expect(await code(run('switchboard.billing.v1.BillingService/CreateTopup', developer))).toBe('PermissionDenied');
    expect(await code(run('switchboard.billing.v1.BillingService/CreateTopup', { ...developer, role: 'admin' }))).toBe('ok');
    expect(await code(run('switchboard.billing.v1.BillingService/GetBalance', { caller: 'gateway' }))).toBe('Unauthenticated');
  });

  it('lets only the named components call internal RPCs', async () => {
    expect(await code(run('switchboard.keys.v1.KeyService/AuthorizeKey', { caller: 'gateway' }))).toBe('PermissionDenied');
    expect(await code(run('switchboard.keys.v1.KeyService/AuthorizeKey', { caller: 'data-plane' }))).toBe('ok');
  });

  it('fails a handler rule whose handler answered without a decision', async () => {
    expect(await code(run('switchboard.keys.v1.KeyService/RevokeKey', developer))).toBe('Internal');
    const decided = (ctx: { values: ContextValues }) => authorize(ctx, 'keys.manage', { ownerId: 'usr_1' });
    expect(await code(run('switchboard.keys.v1.KeyService/RevokeKey', developer, decided))).toBe('ok');
    const others = (ctx: { values: ContextValues }) => authorize(ctx, 'keys.manage', { ownerId: 'usr_2' });
    expect(await code(run('switchboard.keys.v1.KeyService/RevokeKey', developer, others))).toBe('PermissionDenied');
  });
});
