import { Code } from '@connectrpc/connect';
import { AccountService, AuthService, OrganizationService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { readIdentityConfig } from '@switchboard/identity/config';
import { prepareIdentity } from '@switchboard/identity/prepare';
import { registerRoutes } from '@switchboard/identity/server';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The identity handlers in this process (createRouterTransport), built as main.ts builds them on
 * a schema of their own: how each RPC maps the caller, the input and the domain's answers.
 */

let service: InProcessService;
let clientAs: ReturnType<InProcessService['serve']>;

const gateway = { caller: 'gateway', clientIp: '203.0.113.7' };
const password = 'correct horse battery staple 42';

beforeAll(async () => {
  service = await inProcessService('identity', new URL('../dist/migrations/', import.meta.url));
  const handlers = await prepareIdentity(service.runtime, { ...readIdentityConfig({}), argon2Concurrency: 1, argon2QueueLimit: 8 });
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(() => service?.stop());

/** A registered user, and the claims of a call made with their session. */
async function registered() {
  const email = `${newId('u').toLowerCase()}@example.com`;
  const { user } = await clientAs(AuthService, gateway).register({ email, password, fullName: 'Ada' });
  return { user: user!, claims: { ...gateway, principalId: user!.userId, principalType: 'user' as const, sessionId: newId('ses') } };
}

describe('the identity handlers', () => {
  it('refuse to start on a malformed setting, naming it', () => {
    expect(() => readIdentityConfig({ ARGON2_CONCURRENCY: 'many' })).toThrow(/ARGON2_CONCURRENCY/);
    expect(() => readIdentityConfig({ ARGON2_CONCURRENCY: '0' })).toThrow(/ARGON2_CONCURRENCY must be at least 1/);
    expect(() => readIdentityConfig({ INVITATION_TTL: 'a week' })).toThrow(/INVITATION_TTL/);
  });

  it('register, sign in and read the account', async () => {
    const { user, claims } = await registered();
    expect(user).toMatchObject({ fullName: 'Ada', emailVerified: false });
    const login = await clientAs(AuthService, gateway).login({ email: user.email.toUpperCase(), password });
    expect(login.session?.accessToken).toBeTruthy();
    expect((await clientAs(AccountService, claims).getAccount({})).email).toBe(user.email);
  });

  it('name the field of invalid input', async () => {
    const auth = clientAs(AuthService, gateway);
    expect(await refusalOf(auth.register({ email: 'not an address', password }))).toMatchObject({ code: Code.InvalidArgument, field: 'email' });
    expect(await refusalOf(auth.login({ email: 'a@example.com', password: '' }))).toEqual({
      code: Code.InvalidArgument,
      error: 'invalid_request',
      field: 'password',
    });
    expect(await refusalOf(auth.refresh({ refreshToken: '' }))).toMatchObject({ field: 'refresh_token' });
  });

  it('answer 404 for an organization the caller is not a member of, 403 for an API key on a session-only RPC', async () => {
    const owner = await registered();
    const { organization } = await clientAs(OrganizationService, owner.claims).createOrganization({ name: 'Acme' });
    expect(organization).toMatchObject({ name: 'Acme', role: 'owner' });
    const stranger = await registered();
    expect(await refusalOf(clientAs(OrganizationService, stranger.claims).getOrganization({ orgId: organization!.orgId }))).toEqual({
      code: Code.NotFound,
      error: 'organization_not_found',
      field: '',
    });
    const asKey = { ...owner.claims, principalType: 'key' as const, sessionId: undefined, workspaceId: organization!.orgId, role: 'owner' };
    expect(await refusalOf(clientAs(OrganizationService, asKey).createOrganization({ name: 'Other' }))).toMatchObject({
      code: Code.PermissionDenied,
      error: 'user_session_required',
    });
  });

  it('keep gateway-only RPCs to the gateway, and need a principal on account RPCs', async () => {
    expect(await refusalOf(clientAs(OrganizationService, { caller: 'billing' }).resolveWorkspace({ userId: 'usr_x' }))).toMatchObject({
      code: Code.PermissionDenied,
    });
    expect(await refusalOf(clientAs(OrganizationService, gateway).resolveWorkspace({ userId: '' }))).toMatchObject({ field: 'user_id' });
    expect(await refusalOf(clientAs(AccountService, gateway).getAccount({}))).toMatchObject({ code: Code.Unauthenticated, error: 'unauthenticated' });
  });
});
