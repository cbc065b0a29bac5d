import { create, type DescMethod } from '@bufbuild/protobuf';
import { Code, type ConnectError, type ContextValues, createContextValues } from '@connectrpc/connect';
import { AccessKind, AccessRuleSchema, ErrorDetailSchema, KeyScope } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { BillingService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { FeedbackService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { describe, expect, it } from 'vitest';
import { callerKey } from '../src/call-context.js';
import type { MeshClaims } from '../src/mesh-token.js';
import {
  type Action,
  acceptedScopes,
  allows,
  authorize,
  credentialsOf,
  guardRpc,
  mayGrant,
  mayManageMember,
  parseAccessRule,
  permissions,
  type RpcRule,
  readRpcRules,
  requiredScope,
  roles,
  ruleOf,
} from '../src/policy.js';

/** The permission table of docs/conventions.md#roles, row by row, as the policy module encodes it. */
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
  ['save or remove cards; read and set auto top-up', ['billing.manage'], { owner: true, admin: true, developer: false }],
  ['webhooks', ['webhooks.read', 'webhooks.manage'], { owner: true, admin: true, developer: false }],
  ['audit log', ['audit.read'], { owner: true, admin: true, developer: false }],
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

describe('the access rules of the protos', () => {
  const parse = (init: Parameters<typeof create<typeof AccessRuleSchema>>[1]) => parseAccessRule(create(AccessRuleSchema, init));

  it('reads each kind of rule', () => {
    expect(parse({ kind: AccessKind.PUBLIC })).toEqual({ kind: 'public', userSession: false });
    expect(parse({ kind: AccessKind.ACCOUNT, userSession: true })).toEqual({ kind: 'account', userSession: true });
    expect(parse({ kind: AccessKind.WORKSPACE, actions: ['keys.create'] })).toEqual({ kind: 'workspace', action: 'keys.create', userSession: false });
    expect(parse({ kind: AccessKind.HANDLER, actions: ['members.remove', 'members.leave'] })).toEqual({
      kind: 'handler',
      actions: ['members.remove', 'members.leave'],
      userSession: false,
    });
    expect(parse({ kind: AccessKind.INTERNAL, callers: ['gateway'] })).toEqual({ kind: 'internal', callers: ['gateway'], userSession: false });
  });

  it('refuses rules that are missing, unknown or malformed, saying why', () => {
    expect(parseAccessRule(undefined)).toEqual([expect.stringMatching(/no authorization rule/)]);
    expect(parse({})).toEqual([expect.stringMatching(/no authorization rule/)]);
    expect(parse({ kind: AccessKind.WORKSPACE, actions: ['keys.steal'] })).toEqual([expect.stringMatching(/unknown actions keys\.steal/)]);
    expect(parse({ kind: AccessKind.WORKSPACE, actions: ['keys.read', 'keys.create'] })).toEqual([expect.stringMatching(/exactly one action/)]);
    expect(parse({ kind: AccessKind.HANDLER })).toEqual([expect.stringMatching(/names the actions/)]);
    expect(parse({ kind: AccessKind.INTERNAL })).toEqual([expect.stringMatching(/names its callers/)]);
    expect(parse({ kind: AccessKind.INTERNAL, callers: ['gateway'], userSession: true })).toEqual([expect.stringMatching(/cannot need a user session/)]);
    expect(parse({ kind: AccessKind.PUBLIC, actions: ['keys.read'] })).toEqual([expect.stringMatching(/name no actions/)]);
    // A scope is what an API key needs: meaningless where no key may call.
    for (const rule of [
      { kind: AccessKind.PUBLIC, scope: KeyScope.READ },
      { kind: AccessKind.INTERNAL, callers: ['gateway'], scope: KeyScope.INFERENCE },
      { kind: AccessKind.ACCOUNT, userSession: true, scope: KeyScope.MANAGE },
    ])
      expect(parse(rule)).toEqual([expect.stringMatching(/a scope is for rules an API key may pass/)]);
    expect(parse({ kind: AccessKind.ACCOUNT, scope: KeyScope.INFERENCE })).toEqual({ kind: 'account', userSession: false });
    // Further scopes only beside a stated one (the method's default is never widened).
    expect(parse({ kind: AccessKind.ACCOUNT, alsoScopes: [KeyScope.READ] })).toEqual([expect.stringMatching(/also_scopes name scopes beside a stated scope/)]);
  });

  it('refuse to start a server with an RPC without a rule, naming it', async () => {
    const { Health } = await import('@switchboard/contracts/grpc/health/v1/health_pb');
    expect(() => readRpcRules(Health.methods)).toThrow(/grpc\.health\.v1\.Health\/Check: no authorization rule/);
  });

  it('tell the gateway which credentials a route accepts', () => {
    expect(credentialsOf({ kind: 'public', userSession: false })).toBe('none');
    expect(credentialsOf({ kind: 'account', userSession: true })).toBe('user_session');
    expect(credentialsOf({ kind: 'handler', actions: ['keys.manage'], userSession: false })).toBe('user_session_or_api_key');
  });
});

describe('requiredScope', () => {
  it("is the access rule's scope where the proto states one, else read for a GET route and manage for any other", () => {
    // docs/api/keys.md#scopes: the inference routes state it.
    expect(requiredScope(KeyService.method.getCurrentKey)).toBe('inference');
    expect(requiredScope(BillingService.method.getGenerationRecord)).toBe('inference');
    expect(requiredScope(FeedbackService.method.recordFeedback)).toBe('inference');
    expect(requiredScope(KeyService.method.getKey)).toBe('read');
    expect(requiredScope(KeyService.method.listKeys)).toBe('read');
    expect(requiredScope(BillingService.method.listGenerations)).toBe('read');
    for (const method of [KeyService.method.createKey, KeyService.method.updateKey, KeyService.method.setAlertWebhook, KeyService.method.revokeKey])
      expect(requiredScope(method), method.name).toBe('manage');
    // No REST route (an internal RPC): the strictest.
    expect(requiredScope(KeyService.method.authenticateKey)).toBe('manage');
  });

  it('is the first of the scopes a rule accepts, any one of which admits a key', () => {
    expect(acceptedScopes(BillingService.method.getGenerationRecord)).toEqual(['inference', 'read']);
    expect(acceptedScopes(BillingService.method.listGenerations)).toEqual(['read', 'inference']);
    expect(acceptedScopes(KeyService.method.getKey)).toEqual(['read']);
    expect(acceptedScopes(KeyService.method.authenticateKey)).toEqual(['manage']);
  });
});

describe('guardRpc', () => {
  /** A method without options, for rules no API key reaches. */
  const anyMethod = { name: 'Call', parent: { typeName: 'test.v1.TestService' } } as unknown as DescMethod;
  async function run(rule: RpcRule, claims: MeshClaims, handler: (ctx: { values: ContextValues }) => void = () => undefined, method = anyMethod) {
    const contextValues = createContextValues();
    contextValues.set(callerKey, claims);
    return guardRpc(rule, method, contextValues, async () => {
      handler({ values: contextValues });
      return {};
    });
  }
  const outcome = async (promise: Promise<unknown>) =>
    promise.then(
      () => 'ok',
      (err: ConnectError) => `${Code[err.code]}${err.findDetails(ErrorDetailSchema)[0] ? ` ${err.findDetails(ErrorDetailSchema)[0].code}` : ''}`,
    );
  const developer: MeshClaims = { caller: 'gateway', principalId: 'usr_1', principalType: 'user', workspaceId: 'org_1', role: 'developer' };
  const topup: RpcRule = { kind: 'workspace', action: 'billing.topup', userSession: false };
  const manageKey: RpcRule = { kind: 'handler', actions: ['keys.manage'], userSession: false };

  it('decides workspace rules on the mesh token role before the handler', async () => {
    let ran = false;
    expect(await outcome(run(topup, developer, () => (ran = true)))).toBe('PermissionDenied forbidden');
    expect(ran).toBe(false);
    expect(await outcome(run(topup, { ...developer, role: 'admin' }))).toBe('ok');
    expect(await outcome(run({ kind: 'workspace', action: 'billing.read', userSession: false }, { caller: 'gateway' }))).toBe(
      'Unauthenticated unauthenticated',
    );
  });

  it('lets only the named components call internal RPCs', async () => {
    const internal: RpcRule = { kind: 'internal', callers: ['data-plane'], userSession: false };
    expect(await outcome(run(internal, { caller: 'gateway' }))).toBe('PermissionDenied forbidden');
    expect(await outcome(run(internal, { caller: 'data-plane' }))).toBe('ok');
  });

  it('lets only the front door call the RPCs of the REST surface, whatever their rule (docs/api/internal-calls.md#mesh-keys)', async () => {
    const rules: RpcRule[] = [{ kind: 'public', userSession: false }, { kind: 'account', userSession: false }, topup, manageKey];
    for (const rule of rules) {
      for (const caller of ['data-plane', 'keys', 'identity', 'unknown']) {
        let ran = false;
        expect(await outcome(run(rule, { caller }, () => (ran = true))), `${rule.kind} from ${caller}`).toBe('PermissionDenied forbidden');
        expect(ran).toBe(false);
      }
    }
    expect(await outcome(run({ kind: 'public', userSession: false }, { caller: 'gateway' }))).toBe('ok');
  });

  it('answers an API key on a user-session rule with user_session_required, before the handler', async () => {
    const sessionOnly: RpcRule = { kind: 'account', userSession: true };
    let ran = false;
    expect(await outcome(run(sessionOnly, { ...developer, principalType: 'key' }, () => (ran = true)))).toBe('PermissionDenied user_session_required');
    expect(ran).toBe(false);
    expect(await outcome(run(sessionOnly, developer))).toBe('ok');
    const accountRpc = KeyService.method.getCurrentKey;
    expect(
      await outcome(run({ kind: 'account', userSession: false }, { ...developer, principalType: 'key', scopes: ['inference'] }, undefined, accountRpc)),
    ).toBe('ok');
  });

  describe("checks an API key's scope before the handler (docs/api/keys.md#scopes)", () => {
    const asKey = (scopes?: string[]): MeshClaims => ({ ...developer, principalType: 'key', keyId: 'key_1', scopes });
    /** The outcome of calling `method` (with its own rule) as `claims`, and whether the handler ran. */
    async function call(method: DescMethod, claims: MeshClaims) {
      let ran = false;
      const decide = (ctx: { values: ContextValues }) => {
        ran = true;
        const rule = ruleOf(method);
        if (rule.kind === 'handler') authorize(ctx, rule.actions[0], { ownerId: 'usr_1' });
      };
      const result = await outcome(run(ruleOf(method), claims, decide, method));
      return { result, ran };
    }

    it("refuses a key without the route's scope with 403 insufficient_scope naming it", async () => {
      const cases: Array<[DescMethod, string[]]> = [
        [KeyService.method.getKey, ['inference', 'manage']],
        [KeyService.method.createKey, ['inference', 'read']],
        [KeyService.method.revokeKey, ['read']],
        [KeyService.method.getCurrentKey, ['read', 'manage']],
        [FeedbackService.method.recordFeedback, ['manage']],
        [BillingService.method.getGenerationRecord, ['manage']],
        [BillingService.method.listGenerations, ['manage']],
      ];
      for (const [method, scopes] of cases) {
        const contextValues = createContextValues();
        contextValues.set(callerKey, asKey(scopes));
        const err = (await guardRpc(ruleOf(method), method, contextValues, async () => ({})).catch((e: ConnectError) => e)) as ConnectError;
        expect(err.code, method.name).toBe(Code.PermissionDenied);
        expect(err.findDetails(ErrorDetailSchema)[0]).toMatchObject({
          code: 'insufficient_scope',
          metadata: { required_scope: requiredScope(method) },
        });
        expect((await call(method, asKey(scopes))).ran, method.name).toBe(false);
      }
    });

    it('lets a key with the scope through to the role', async () => {
      expect(await call(KeyService.method.getKey, asKey(['read']))).toEqual({ result: 'ok', ran: true });
      expect(await call(KeyService.method.getCurrentKey, asKey(['inference']))).toEqual({ result: 'ok', ran: true });
      expect(await call(KeyService.method.revokeKey, asKey(['manage']))).toEqual({ result: 'ok', ran: true });
      // Any one scope the rule accepts (docs/api/keys.md#scopes: the generation routes take inference or read).
      for (const method of [BillingService.method.getGenerationRecord, BillingService.method.listGenerations])
        for (const scope of ['inference', 'read']) expect(await call(method, asKey([scope])), `${method.name} ${scope}`).toEqual({ result: 'ok', ran: true });
      // The scope allows what the creator's role allows, never more.
      const topupKey = { ...asKey(['manage']), role: 'developer' };
      expect((await call(BillingService.method.createTopup, topupKey)).result).toBe('PermissionDenied forbidden');
    });

    it('fails closed: a key whose mesh token carries no scopes, or an empty claim, may call nothing', async () => {
      for (const scopes of [undefined, []]) {
        expect(await call(KeyService.method.getCurrentKey, asKey(scopes))).toEqual({ result: 'PermissionDenied insufficient_scope', ran: false });
        expect(await call(KeyService.method.getKey, asKey(scopes))).toEqual({ result: 'PermissionDenied insufficient_scope', ran: false });
      }
    });

    it('asks nothing of user sessions and internal callers', async () => {
      expect(await call(KeyService.method.createKey, developer)).toEqual({ result: 'ok', ran: true });
      expect(await call(KeyService.method.authenticateKey, { caller: 'gateway' })).toEqual({ result: 'ok', ran: true });
    });

    it('answers user_session_required before the scope', async () => {
      const sessionOnly: RpcRule = { kind: 'account', userSession: true };
      expect(await outcome(run(sessionOnly, asKey([])))).toBe('PermissionDenied user_session_required');
    });
  });

  it('fails a handler rule whose handler answered without a decision', async () => {
    expect(await outcome(run(manageKey, developer))).toBe('Internal');
    const decided = (ctx: { values: ContextValues }) => authorize(ctx, 'keys.manage', { ownerId: 'usr_1' });
    expect(await outcome(run(manageKey, developer, decided))).toBe('ok');
    const others = (ctx: { values: ContextValues }) => authorize(ctx, 'keys.manage', { ownerId: 'usr_2' });
    expect(await outcome(run(manageKey, developer, others))).toBe('PermissionDenied forbidden');
  });

  it('refuses an RPC that has no rule', async () => {
    expect(await outcome(run(undefined as unknown as RpcRule, developer))).toBe('Internal');
  });
});
