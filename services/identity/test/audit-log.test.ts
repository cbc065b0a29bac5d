import { AuditLog } from '@switchboard/identity/audit-log';
import { readIdentityConfig } from '@switchboard/identity/config';
import { createDb, createRolePool, type Knex } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { eventually } from '@switchboard/runtime/testing';
import { TestAuthenticator } from '@switchboard/testkit/account-helpers';
import { Mailbox, tokenOf } from '@switchboard/testkit/mailbox';
import { type ApiResponse, expectErrorBody, fromAddress, meshSuiteOfFile, type RestCall, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The audit log (docs/api/audit.md) through the front door: each of identity's own actions
 * leaves exactly one record with its actor (type, id, address), target, workspace, request id
 * and outcome; refusals are recorded; the list filters, pages and stays within its workspace;
 * and the table is append-only for the API's role.
 */

// The gateway trusts one proxy hop: each call says which address it comes from.
const suite = meshSuiteOfFile(() => ({ GATEWAY_TRUSTED_PROXIES: '127.0.0.1,::1' }));
let db: Knex;
let mailbox: Mailbox;

beforeAll(() => {
  db = createDb(suite.mesh.env.DATABASE_URL, 'identity', 2);
  mailbox = new Mailbox(suite.mesh.env.MAILBOX_DIR);
});
afterAll(async () => {
  await db?.destroy();
});

let addressCounter = 0;
/** A client acting from an address of its own, and that address. */
function client(): { call: RestCall; ip: string } {
  addressCounter += 1;
  const ip = `198.51.100.${addressCounter}`;
  return { call: fromAddress(suite.call, ip), ip };
}

const requestIdOf = (response: ApiResponse) => {
  const id = response.headers.get('x-request-id');
  expect(id).toBeTruthy();
  return id as string;
};

interface AuditEvent {
  event_id: string;
  action: string;
  actor: { type: string; id: string; ip: string | null };
  target: { type: string; id: string } | null;
  workspace_id: string;
  request_id: string | null;
  outcome: string;
  metadata: Record<string, unknown>;
  created_at: string;
}

/** One page of the caller's audit log (200 asserted). */
async function auditPage(
  token: string,
  query = '',
  headers?: Record<string, string>,
): Promise<{ data: AuditEvent[]; has_more: boolean; next_cursor: string | null }> {
  const response = await suite.call('GET', `/v1/audit-events${query}`, { token, headers });
  expect(response.status, response.text).toBe(200);
  return response.json;
}

/**
 * Waits for the record of `action` written by the request `requestId` (records arrive through
 * outbox → NATS → consumer), then asserts it is the only one of that action for the request.
 */
async function recordOf(token: string, action: string, requestId: string, headers?: Record<string, string>): Promise<AuditEvent> {
  const records = await eventually(
    async () => {
      const found = (await auditPage(token, `?limit=100&action=${action}`, headers)).data.filter((record) => record.request_id === requestId);
      return found.length > 0 && found;
    },
    `the ${action} record of ${requestId}`,
    10_000,
    100,
  );
  expect(records, `${action} records of ${requestId}`).toHaveLength(1);
  return records[0];
}

/** The actor of a user's call from `ip`. */
const userActor = (user: { userId: string }, ip: string) => ({ type: 'user', id: user.userId, ip });

async function login(call: RestCall, user: { email: string; password: string }): Promise<ApiResponse> {
  return call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
}

describe('records of sign-ins', () => {
  it('a sign-in, a wrong password and a throttled sign-in each leave one record in the personal workspace (a throttled account one a minute)', async () => {
    const { call, ip } = client();
    const user = await signUp(call);

    const ok = await login(call, user);
    expect(ok.status, ok.text).toBe(200);
    const signedIn = await recordOf(user.token, 'user.signed_in', requestIdOf(ok));
    expect(signedIn).toMatchObject({
      event_id: expect.stringMatching(/^aud_/),
      actor: userActor(user, ip),
      target: { type: 'user', id: user.userId },
      workspace_id: user.workspaceId,
      outcome: 'success',
      metadata: { method: 'password' },
    });
    expect(Date.parse(signedIn.created_at)).not.toBeNaN();

    // Five wrong passwords fill the account's throttle; the sixth attempt is refused before any check.
    const failures: ApiResponse[] = [];
    for (let n = 0; n < 5; n++) failures.push(await login(call, { email: user.email, password: `not the password ${n}` }));
    for (const failure of failures) expectErrorBody(failure, 401, 'invalid_credentials');
    const failed = await recordOf(user.token, 'user.sign_in_failed', requestIdOf(failures[0]));
    expect(failed).toMatchObject({ actor: userActor(user, ip), target: { type: 'user', id: user.userId }, workspace_id: user.workspaceId, outcome: 'failed' });
    expect(failed.metadata).toEqual({ reason: 'wrong_password' });
    const throttled = await login(call, user);
    expectErrorBody(throttled, 429, 'too_many_attempts');
    const refusal = await recordOf(user.token, 'user.sign_in_throttled', requestIdOf(throttled));
    expect(refusal).toMatchObject({
      actor: userActor(user, ip),
      workspace_id: user.workspaceId,
      outcome: 'denied',
      metadata: { reason: 'too_many_attempts', step: 'password' },
    });
    // A second throttled attempt within the minute is refused and logged, but not recorded again
    // (its outbox row would be written before the 429: the record is awaited).
    const again = await login(call, user);
    expectErrorBody(again, 429, 'too_many_attempts');
    const written = (requestId: string) => db('outbox').whereRaw("payload->>'request_id' = ?", [requestId]).count<{ count: string }[]>('* as count');
    expect(Number((await written(requestIdOf(throttled)))[0].count)).toBe(1);
    expect(Number((await written(requestIdOf(again)))[0].count)).toBe(0);
    // Every failure is there, each once.
    const allFailed = (await auditPage(user.token, '?action=user.sign_in_failed&limit=100')).data;
    expect(allFailed.map((record) => record.request_id).sort()).toEqual(failures.map(requestIdOf).sort());
  });

  it('an unknown address leaves no record anywhere', async () => {
    const { call } = client();
    const user = await signUp(call);
    const unknown = await login(call, { email: `nobody.${user.email}`, password: user.password });
    expectErrorBody(unknown, 401, 'invalid_credentials');
    const [row] = await db('audit_events').where({ request_id: requestIdOf(unknown) });
    expect(row).toBeUndefined();
  });

  it('2FA on, a wrong code, a sign-in with a code, 2FA off: one record each', async () => {
    const { call, ip } = client();
    const user = await signUp(call);
    const enrolled = await call('POST', '/v1/account/2fa/enroll', { token: user.token, body: { password: user.password } });
    expect(enrolled.status, enrolled.text).toBe(200);
    const app = new TestAuthenticator(enrolled.json.secret);
    const activated = await call('POST', '/v1/account/2fa/activate', { token: user.token, body: { code: await app.code() } });
    expect(activated.status, activated.text).toBe(200);
    const enabled = await recordOf(user.token, 'user.two_factor_enabled', requestIdOf(activated));
    expect(enabled).toMatchObject({
      actor: userActor(user, ip),
      target: { type: 'user', id: user.userId },
      workspace_id: user.workspaceId,
      outcome: 'success',
    });

    const first = await login(call, user);
    expect(first.json.mfa_required).toBe(true);
    // The password step alone is no sign-in.
    const wrong = await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: first.json.mfa_token, code: app.wrongCode() } });
    expectErrorBody(wrong, 401, 'invalid_code', 'code');
    const failed = await recordOf(user.token, 'user.sign_in_failed', requestIdOf(wrong));
    expect(failed).toMatchObject({ actor: userActor(user, ip), workspace_id: user.workspaceId, outcome: 'failed', metadata: { reason: 'wrong_code' } });
    const second = await call('POST', '/v1/auth/login/2fa', { body: { mfa_token: first.json.mfa_token, code: await app.code() } });
    expect(second.status, second.text).toBe(200);
    const signedIn = await recordOf(user.token, 'user.signed_in', requestIdOf(second));
    expect(signedIn).toMatchObject({ actor: userActor(user, ip), workspace_id: user.workspaceId, outcome: 'success', metadata: { method: 'totp' } });
    expect((await auditPage(user.token, `?action=user.signed_in&limit=100`)).data.filter((r) => r.request_id === requestIdOf(first))).toEqual([]);

    const disabled = await call('POST', '/v1/account/2fa/disable', { token: user.token, body: { password: user.password } });
    expect(disabled.status, disabled.text).toBe(204);
    const off = await recordOf(user.token, 'user.two_factor_disabled', requestIdOf(disabled));
    expect(off).toMatchObject({ actor: userActor(user, ip), target: { type: 'user', id: user.userId }, workspace_id: user.workspaceId, outcome: 'success' });
  });
});

describe('records of credentials and sessions', () => {
  it('a password change, a logout, a revoked session and a password reset: one record per action, one session.revoked each', async () => {
    const { call, ip } = client();
    const user = await signUp(call);
    expect((await login(call, user)).status).toBe(200);

    // Sign out one session from the list.
    const sessions = await call('GET', '/v1/account/sessions', { token: user.token });
    const otherId = sessions.json.data.find((s: { current: boolean }) => !s.current).session_id as string;
    const revokedOne = await call('DELETE', `/v1/account/sessions/${otherId}`, { token: user.token });
    expect(revokedOne.status, revokedOne.text).toBe(204);
    expect(await recordOf(user.token, 'session.revoked', requestIdOf(revokedOne))).toMatchObject({
      actor: userActor(user, ip),
      target: { type: 'session', id: otherId },
      workspace_id: user.workspaceId,
      outcome: 'success',
      metadata: { reason: 'logout', sessions: 1 },
    });

    // Log out with a session's own token.
    const third = await login(call, user);
    const logout = await call('POST', '/v1/auth/logout', { token: third.json.session.access_token, body: { scope: 'local' } });
    expect(logout.status, logout.text).toBe(204);
    expect(await recordOf(user.token, 'session.revoked', requestIdOf(logout))).toMatchObject({
      actor: userActor(user, ip),
      target: { type: 'session', id: expect.stringMatching(/^ses_/) },
      metadata: { reason: 'logout', sessions: 1 },
    });

    // A new password: the two other live sessions end with it (the caller's stays).
    await login(call, user);
    await login(call, user);
    const newPassword = `${user.password} changed`;
    const changed = await call('POST', '/v1/account/password', { token: user.token, body: { current_password: user.password, new_password: newPassword } });
    expect(changed.status, changed.text).toBe(204);
    expect(await recordOf(user.token, 'user.password_changed', requestIdOf(changed))).toMatchObject({
      actor: userActor(user, ip),
      target: { type: 'user', id: user.userId },
      workspace_id: user.workspaceId,
      outcome: 'success',
    });
    const changeRevocation = await recordOf(user.token, 'session.revoked', requestIdOf(changed));
    expect(changeRevocation).toMatchObject({ actor: userActor(user, ip), target: { type: 'user', id: user.userId }, metadata: { reason: 'password_change' } });
    expect(changeRevocation.metadata.sessions).toBe(2);

    // A reset by mail: every session ends.
    expect((await call('POST', '/v1/auth/password-reset', { body: { email: user.email } })).status).toBe(202);
    const mail = await mailbox.waitFor((m) => m.to === user.email && m.kind === 'password_reset_request', 'the reset mail');
    const reset = await call('POST', '/v1/auth/password-reset/confirm', { body: { token: tokenOf(mail), new_password: `${newPassword} reset` } });
    expect(reset.status, reset.text).toBe(204);
    const fresh = await login(call, { email: user.email, password: `${newPassword} reset` });
    const token = fresh.json.session.access_token as string;
    expect(await recordOf(token, 'user.password_reset', requestIdOf(reset))).toMatchObject({
      actor: userActor(user, ip),
      target: { type: 'user', id: user.userId },
      workspace_id: user.workspaceId,
      outcome: 'success',
    });
    expect(await recordOf(token, 'session.revoked', requestIdOf(reset))).toMatchObject({ actor: userActor(user, ip), metadata: { reason: 'password_reset' } });
  });

  it('a refresh token replayed after rotation: the refusal still leaves the system’s session.revoked, reason refresh_token_reuse', async () => {
    const { call } = client();
    const user = await signUp(call);
    const signedIn = await login(call, user);
    const stolen = signedIn.json.session.refresh_token as string;
    const first = await call('POST', '/v1/auth/refresh', { body: { refresh_token: stolen } });
    expect(first.status, first.text).toBe(200);
    // The successor is used too: the stolen token is past its concurrent-tab grace.
    const second = await call('POST', '/v1/auth/refresh', { body: { refresh_token: first.json.session.refresh_token } });
    expect(second.status, second.text).toBe(200);
    const replayed = await call('POST', '/v1/auth/refresh', { body: { refresh_token: stolen } });
    expectErrorBody(replayed, 401, 'invalid_token');
    expect(await recordOf(user.token, 'session.revoked', requestIdOf(replayed))).toMatchObject({
      actor: { type: 'system', id: '', ip: null },
      target: { type: 'session', id: expect.stringMatching(/^ses_/) },
      workspace_id: user.workspaceId,
      outcome: 'success',
      metadata: { reason: 'refresh_token_reuse', sessions: 1 },
    });
  });

  it('a deactivation: one session.revoked of every session it ended, reason deactivation, kept after the account is gone', async () => {
    const { call, ip } = client();
    const user = await signUp(call);
    await login(call, user);
    const deactivated = await call('POST', '/v1/account/deactivate', { token: user.token, body: { password: user.password } });
    expect(deactivated.status, deactivated.text).toBe(202);
    // The account can no longer read its log: the record is read where the log keeps it.
    const requestId = requestIdOf(deactivated);
    const rows = await eventually(
      async () => {
        const found = await db('audit_events').where({ request_id: requestId, action: 'session.revoked' });
        return found.length > 0 && found;
      },
      `the session.revoked record of ${requestId}`,
      10_000,
      100,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      workspace_id: user.workspaceId,
      actor_type: 'user',
      actor_id: user.userId,
      actor_ip: ip,
      target_type: 'user',
      target_id: user.userId,
      outcome: 'success',
      metadata: { reason: 'deactivation', sessions: 2 },
    });
  });
});

describe('records of organizations', () => {
  let owner: SignedUp;
  let ownerIp: string;
  let ownerCall: RestCall;
  let dev: SignedUp;
  let devCall: RestCall;
  let devIp: string;
  let admin: SignedUp;
  let adminCall: RestCall;
  let adminIp: string;
  let orgId: string;
  const inOrg = () => ({ 'x-workspace-id': orgId });

  beforeAll(async () => {
    ({ call: ownerCall, ip: ownerIp } = client());
    ({ call: devCall, ip: devIp } = client());
    ({ call: adminCall, ip: adminIp } = client());
    owner = await signUp(ownerCall);
    dev = await signUp(devCall);
    admin = await signUp(adminCall);
    const created = await ownerCall('POST', '/v1/organizations', { token: owner.token, body: { name: `Audit ${newId('o')}` } });
    expect(created.status, created.text).toBe(201);
    orgId = created.json.organization.org_id;
  });

  it('invitations, joins, a role change, a denial, a removal, a transfer and a deletion', async () => {
    const name = (await ownerCall('GET', `/v1/organizations/${orgId}`, { token: owner.token })).json.name as string;
    const invites: Record<string, ApiResponse> = {};
    for (const [member, role] of [
      [dev, 'developer'],
      [admin, 'admin'],
    ] as const) {
      invites[role] = await ownerCall('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: member.email, role } });
      expect(invites[role].status, invites[role].text).toBe(201);
    }
    const invited = await recordOf(owner.token, 'member.invited', requestIdOf(invites.developer), inOrg());
    expect(invited).toMatchObject({
      actor: userActor(owner, ownerIp),
      target: { type: 'invitation', id: invites.developer.json.invitation_id },
      workspace_id: orgId,
      outcome: 'success',
      metadata: { role: 'developer' },
    });

    const joins: ApiResponse[] = [];
    for (const [member, call] of [
      [dev, devCall],
      [admin, adminCall],
    ] as const) {
      const token = await mailbox.invitationToken(member.email, name);
      const joined = await call('POST', '/v1/invitations/accept', { token: member.token, body: { token } });
      expect(joined.status, joined.text).toBe(200);
      joins.push(joined);
    }
    expect(await recordOf(owner.token, 'member.joined', requestIdOf(joins[0]), inOrg())).toMatchObject({
      actor: userActor(dev, devIp),
      target: { type: 'member', id: dev.userId },
      workspace_id: orgId,
      metadata: { role: 'developer', invitation_id: invites.developer.json.invitation_id },
    });

    // A developer reading the audit log: 403, and the refusal is a record of the organization.
    const denied = await devCall('GET', '/v1/audit-events', { token: dev.token, headers: inOrg() });
    expectErrorBody(denied, 403, 'forbidden');
    const refusal = await recordOf(owner.token, 'access.denied', requestIdOf(denied), inOrg());
    expect(refusal).toMatchObject({
      actor: userActor(dev, devIp),
      workspace_id: orgId,
      outcome: 'denied',
      metadata: { reason: 'audit.read', role: 'developer' },
    });
    // An admin reads it.
    expect((await auditPage(admin.token, '', inOrg())).data.length).toBeGreaterThan(0);

    const promoted = await ownerCall('PATCH', `/v1/organizations/${orgId}/members/${dev.userId}`, { token: owner.token, body: { role: 'admin' } });
    expect(promoted.status, promoted.text).toBe(200);
    expect(await recordOf(owner.token, 'member.role_changed', requestIdOf(promoted), inOrg())).toMatchObject({
      actor: userActor(owner, ownerIp),
      target: { type: 'member', id: dev.userId },
      workspace_id: orgId,
      metadata: { role: 'admin', previous_role: 'developer' },
    });

    const removed = await ownerCall('DELETE', `/v1/organizations/${orgId}/members/${dev.userId}`, { token: owner.token });
    expect(removed.status, removed.text).toBe(204);
    expect(await recordOf(owner.token, 'member.removed', requestIdOf(removed), inOrg())).toMatchObject({
      actor: userActor(owner, ownerIp),
      target: { type: 'member', id: dev.userId },
      workspace_id: orgId,
      metadata: { left: false },
    });

    const transferred = await ownerCall('POST', `/v1/organizations/${orgId}/transfer-ownership`, {
      token: owner.token,
      body: { new_owner_user_id: admin.userId },
    });
    expect(transferred.status, transferred.text).toBe(200);
    expect(await recordOf(owner.token, 'organization.ownership_transferred', requestIdOf(transferred), inOrg())).toMatchObject({
      actor: userActor(owner, ownerIp),
      target: { type: 'member', id: admin.userId },
      workspace_id: orgId,
      outcome: 'success',
    });

    const deleted = await adminCall('DELETE', `/v1/organizations/${orgId}`, { token: admin.token });
    expect(deleted.status, deleted.text).toBe(204);
    // The organization's workspace is gone: the record is the deleting owner's, in their personal workspace.
    expect(await recordOf(admin.token, 'organization.deleted', requestIdOf(deleted))).toMatchObject({
      actor: userActor(admin, adminIp),
      target: { type: 'organization', id: orgId },
      workspace_id: admin.workspaceId,
      outcome: 'success',
    });
  });
});

describe('the list', () => {
  it('pages newest first, filters by action, actor and time, and shows only its own workspace', async () => {
    const { call } = client();
    const user = await signUp(call);
    const stranger = await signUp(client().call);
    const signIns: ApiResponse[] = [];
    for (let n = 0; n < 3; n++) signIns.push(await login(call, user));
    await login(client().call, stranger);
    await recordOf(user.token, 'user.signed_in', requestIdOf(signIns[2]));
    const all = (await auditPage(user.token, '?limit=100')).data;
    expect(all.length).toBeGreaterThanOrEqual(3);
    expect(all.every((record) => record.workspace_id === user.workspaceId)).toBe(true);
    expect(all.some((record) => record.actor.id === stranger.userId)).toBe(false);
    const times = all.map((record) => Date.parse(record.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));

    // Page by page, two at a time: the same records in the same order.
    const paged: AuditEvent[] = [];
    let query = '?limit=2';
    for (;;) {
      const page = await auditPage(user.token, query);
      expect(page.data.length).toBeLessThanOrEqual(2);
      paged.push(...page.data);
      if (!page.has_more) {
        expect(page.next_cursor).toBeNull();
        break;
      }
      query = `?limit=2&after=${page.next_cursor}`;
    }
    expect(paged.map((record) => record.event_id)).toEqual(all.map((record) => record.event_id));

    const signedIn = (await auditPage(user.token, '?action=user.signed_in')).data;
    expect(signedIn.map((record) => record.request_id)).toEqual(signIns.map(requestIdOf).reverse());
    expect((await auditPage(user.token, `?actor_id=${user.userId}&limit=100`)).data).toHaveLength(all.filter((r) => r.actor.id === user.userId).length);
    expect((await auditPage(user.token, `?actor_id=${stranger.userId}`)).data).toEqual([]);

    const middle = signedIn[1];
    const since = (await auditPage(user.token, `?action=user.signed_in&since=${encodeURIComponent(middle.created_at)}`)).data;
    expect(since.map((r) => r.event_id)).toEqual([signedIn[0].event_id, middle.event_id]);
    const until = (await auditPage(user.token, `?action=user.signed_in&until=${encodeURIComponent(middle.created_at)}`)).data;
    expect(until.map((r) => r.event_id)).toEqual([signedIn[2].event_id]);
    // The stranger sees none of it.
    expect((await auditPage(stranger.token, '?limit=100')).data.some((record) => record.actor.id === user.userId)).toBe(false);
  });

  it('answers 400 naming the parameter', async () => {
    const user = await signUp(client().call);
    for (const [query, field] of [
      ['?limit=0', 'limit'],
      ['?limit=101', 'limit'],
      ['?after=not-a-cursor', 'after'],
      ['?since=yesterday', 'since'],
      ['?until=2026-02-30T00:00:00Z', 'until'],
      ['?since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z', 'since'],
      // Only an action of the catalogue (docs/api/audit.md#actions): a typo is a 400, not an empty list.
      ['?action=key.deleted', 'action'],
      [`?action=${'a'.repeat(201)}`, 'action'],
      [`?actor_id=${'u'.repeat(201)}`, 'actor_id'],
    ]) {
      expectErrorBody(await suite.call('GET', `/v1/audit-events${query}`, { token: user.token }), 400, 'invalid_request', field);
    }
  });
});

describe('the table', () => {
  it('is append-only: the writer role may not update or delete, and nobody deletes a young record', async () => {
    const user = await signUp(client().call);
    const ok = await login(client().call, user);
    const record = await recordOf(user.token, 'user.signed_in', requestIdOf(ok));
    await db.transaction(async (trx) => {
      await trx.raw('SET LOCAL ROLE switchboard_audit_writer');
      await expect(trx('audit_events').where({ id: record.event_id }).update({ outcome: 'failed' })).rejects.toMatchObject({ code: '42501' });
    });
    await db.transaction(async (trx) => {
      await trx.raw('SET LOCAL ROLE switchboard_audit_writer');
      await expect(trx('audit_events').where({ id: record.event_id }).delete()).rejects.toMatchObject({
        code: '42501',
        message: expect.stringMatching(/permission denied/),
      });
    });
    // The table's owner is refused by the trigger.
    await expect(db('audit_events').where({ id: record.event_id }).delete()).rejects.toThrow(/at least 365 days/);
    await expect(db('audit_events').where({ id: record.event_id }).update({ outcome: 'failed' })).rejects.toThrow(/append-only/);
    await expect(db.raw('TRUNCATE audit_events')).rejects.toThrow(/append-only/);
    const [row] = await db('audit_events').where({ id: record.event_id });
    expect(row.outcome).toBe('success');
  });

  it('the retention sweeper deletes the records older than AUDIT_RETENTION, and only those', async () => {
    const user = await signUp(client().call);
    const old = { id: `aud_${newId('old')}`, created_at: new Date(Date.now() - 400 * 24 * 3600 * 1000) };
    const kept = { id: `aud_${newId('kept')}`, created_at: new Date(Date.now() - 380 * 24 * 3600 * 1000) };
    for (const row of [old, kept]) {
      await db('audit_events').insert({
        ...row,
        workspace_id: user.workspaceId,
        action: 'test.old',
        actor_type: 'system',
        outcome: 'success',
        producer: 'test',
      });
    }
    const auditLog = new AuditLog({ db, reader: db, log: createLogger('audit-test', 'silent'), retentionMs: 390 * 24 * 3600 * 1000 });
    expect(await auditLog.sweep()).toBeGreaterThanOrEqual(1);
    expect((await db('audit_events').whereIn('id', [old.id, kept.id])).map((row) => row.id)).toEqual([kept.id]);
  });

  it('reads records through the writer role, which may read and insert only', async () => {
    const user = await signUp(client().call);
    const ok = await login(client().call, user);
    const record = await recordOf(user.token, 'user.signed_in', requestIdOf(ok));
    const reader = createRolePool(db, 'switchboard_audit_writer', 1);
    try {
      expect(await reader('audit_events').where({ id: record.event_id }).pluck('id')).toEqual([record.event_id]);
      expect((await reader.raw('SELECT current_user AS role')).rows[0].role).toBe('switchboard_audit_writer');
      await expect(reader('audit_events').where({ id: record.event_id }).delete()).rejects.toMatchObject({ code: '42501' });
      await expect(reader('sessions').select('id').limit(1)).rejects.toMatchObject({ code: '42501' });
    } finally {
      await reader.destroy();
    }
  });

  it('AUDIT_RETENTION is a duration of at least 365 days', () => {
    expect(readIdentityConfig({}).auditRetentionMs).toBe(365 * 24 * 3600 * 1000);
    expect(readIdentityConfig({ AUDIT_RETENTION: '400d' }).auditRetentionMs).toBe(400 * 24 * 3600 * 1000);
    expect(() => readIdentityConfig({ AUDIT_RETENTION: '30d' })).toThrow(/AUDIT_RETENTION must be at least 365d/);
    expect(() => readIdentityConfig({ AUDIT_RETENTION: 'forever' })).toThrow(/AUDIT_RETENTION/);
  });
});
