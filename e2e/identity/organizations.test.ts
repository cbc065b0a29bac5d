import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually } from '@switchboard/runtime/testing';
import { Mailbox, tokenOfLink } from '@switchboard/testkit/mailbox';
import { bootMesh, expectErrorBody, restClient } from '@switchboard/testkit/mesh';
import { type User, World } from '@switchboard/testkit/permissions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** Organizations through REST: listing, ownership invariants, invitations, events. */

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let world: World;
let mailbox: Mailbox;
let db: Knex;

beforeAll(async () => {
  // Invitations live 3 s here, so the expiry test waits seconds, not 7 days.
  mesh = await bootMesh({ INVITATION_TTL: '3s' });
  call = restClient(mesh.gatewayUrl);
  mailbox = new Mailbox(mesh.env.MAILBOX_DIR);
  world = new World(call, mailbox);
  db = createDb(mesh.env.DATABASE_URL, 'identity', 2);
});

afterAll(async () => {
  await db?.destroy();
  await mesh?.stop();
});

async function newOrganization(owner: User, name = `Org ${Math.random().toString(36).slice(2, 10)}`) {
  const response = await call('POST', '/v1/organizations', { token: owner.token, body: { name } });
  expect(response.status, response.text).toBe(201);
  return { orgId: response.json.organization.org_id as string, name };
}

async function join(owner: User, orgId: string, name: string, user: User, role: string) {
  const { token } = await world.invite(owner, orgId, name, user.email, role);
  const accepted = await world.accept(user, token);
  expect(accepted.status, accepted.text).toBe(200);
  return accepted.json;
}

async function owners(orgId: string): Promise<string[]> {
  const rows = await db('memberships').where({ org_id: orgId, role: 'owner' }).select('user_id');
  return rows.map((row: { user_id: string }) => row.user_id);
}

async function outboxEvents(orgId: string, type: string): Promise<Array<{ data: Record<string, unknown> }>> {
  const rows = await db('outbox').whereRaw(`payload->>'type' = ? AND payload->>'workspace_id' = ?`, [type, orgId]).orderBy('id').select('payload');
  return rows.map((row: { payload: { data: Record<string, unknown> } }) => row.payload);
}

describe('organizations', () => {
  it('creates one (201 {organization}) and lists the personal one too, newest first, page by page', async () => {
    const user = await world.user('lister');
    const created = await call('POST', '/v1/organizations', { token: user.token, body: { name: '  Acme Research  ' } });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      organization: { org_id: expect.stringMatching(/^org_/), name: 'Acme Research', created_at: expect.any(String), role: 'owner', personal: false },
    });
    await newOrganization(user, 'Third');

    const first = await call('GET', '/v1/organizations?limit=2', { token: user.token });
    expect(first.status).toBe(200);
    expect(first.json.data.map((o: { name: string }) => o.name)).toEqual(['Third', 'Acme Research']);
    expect(first.json).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    const second = await call('GET', `/v1/organizations?limit=2&after=${first.json.next_cursor}`, { token: user.token });
    expect(second.json).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.json.data).toEqual([expect.objectContaining({ org_id: user.personalWorkspaceId, role: 'owner', personal: true })]);

    expectErrorBody(await call('GET', '/v1/organizations?limit=0', { token: user.token }), 400, 'invalid_request', 'limit');
    expectErrorBody(await call('GET', '/v1/organizations?limit=101', { token: user.token }), 400, 'invalid_request', 'limit');
    expectErrorBody(await call('GET', '/v1/organizations?after=garbage!', { token: user.token }), 400, 'invalid_request', 'after');
    expectErrorBody(await call('POST', '/v1/organizations', { token: user.token, body: { name: '   ' } }), 400, 'invalid_request', 'name');
    // The unversioned alias answers the same.
    expect((await call('GET', `/organizations/${created.json.organization.org_id}`, { token: user.token })).json.name).toBe('Acme Research');
  });

  it('deletes an organization (owner only), never the personal workspace, and emits organization.deleted', async () => {
    const owner = await world.user('deleter');
    const { orgId } = await newOrganization(owner);
    expectErrorBody(await call('DELETE', `/v1/organizations/${owner.personalWorkspaceId}`, { token: owner.token }), 422, 'personal_workspace');
    expect((await call('DELETE', `/v1/organizations/${orgId}`, { token: owner.token })).status).toBe(204);
    expectErrorBody(await call('GET', `/v1/organizations/${orgId}`, { token: owner.token }), 404, 'organization_not_found');
    expect(await outboxEvents(orgId, 'organization.deleted')).toEqual([expect.objectContaining({ data: { org_id: orgId, deleted_by: owner.userId } })]);
  });
});

describe('order of checks', () => {
  it("answers 404 for another tenant's organization before anything about the body", async () => {
    const owner = await world.user('o-owner');
    const stranger = await world.user('o-stranger');
    const { orgId } = await newOrganization(owner);
    const path = `/v1/organizations/${orgId}/invitations`;
    const missing = await call('POST', '/v1/organizations/org_doesnotexist000000000/invitations', { token: stranger.token, body: { email: 5 } });
    for (const response of [
      await call('POST', path, { token: stranger.token, body: { email: 5, role: 'admin' } }),
      await call('POST', path, { token: stranger.token, rawBody: '{"email": ', headers: { 'content-type': 'application/json' } }),
      await call('POST', path, { token: stranger.token, rawBody: 'email=x', headers: { 'content-type': 'text/plain' } }),
    ]) {
      expectErrorBody(response, 404, 'organization_not_found');
      expect(response.json.error.message).toBe(missing.json.error.message);
    }
    // A member still learns about the input.
    expectErrorBody(await call('POST', path, { token: owner.token, body: { email: 5, role: 'admin' } }), 400, 'invalid_request', 'email');
  });
});

describe('ownership invariants', () => {
  it('refuses a transfer to a non-member (422 not_a_member) and moves ownership to a member (old owner becomes admin)', async () => {
    const owner = await world.user('t-owner');
    const member = await world.user('t-member');
    const stranger = await world.user('t-stranger');
    const { orgId, name } = await newOrganization(owner);
    await join(owner, orgId, name, member, 'developer');

    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: { new_owner_user_id: stranger.userId } }),
      422,
      'not_a_member',
      'new_owner_user_id',
    );
    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: {} }),
      400,
      'invalid_request',
      'new_owner_user_id',
    );
    expect(await owners(orgId)).toEqual([owner.userId]);

    const moved = await call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: { new_owner_user_id: member.userId } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.json).toMatchObject({ org_id: orgId, role: 'admin' });
    const members = await call('GET', `/v1/organizations/${orgId}/members`, { token: member.token });
    const roles = Object.fromEntries(members.json.data.map((m: { user_id: string; role: string }) => [m.user_id, m.role]));
    expect(roles).toEqual({ [owner.userId]: 'admin', [member.userId]: 'owner' });
    // The former owner is an admin now: transferring again is the new owner's call.
    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: { new_owner_user_id: owner.userId } }),
      403,
      'forbidden',
    );
  });

  it('keeps a personal workspace with its account (no transfer)', async () => {
    const owner = await world.user('p-owner');
    const member = await world.user('p-member');
    const personal = await call('GET', `/v1/organizations/${owner.personalWorkspaceId}`, { token: owner.token });
    expect(personal.json).toMatchObject({ personal: true, role: 'owner' });
    await join(owner, owner.personalWorkspaceId, personal.json.name, member, 'admin');
    expectErrorBody(
      await call('POST', `/v1/organizations/${owner.personalWorkspaceId}/transfer-ownership`, {
        token: owner.token,
        body: { new_owner_user_id: member.userId },
      }),
      422,
      'personal_workspace',
    );
    expect(await owners(owner.personalWorkspaceId)).toEqual([owner.userId]);
  });

  it('refuses removing or demoting the owner: 409 for the owner itself, 403 for an admin', async () => {
    const owner = await world.user('d-owner');
    const admin = await world.user('d-admin');
    const { orgId, name } = await newOrganization(owner);
    await join(owner, orgId, name, admin, 'admin');
    const ownerPath = `/v1/organizations/${orgId}/members/${owner.userId}`;

    expectErrorBody(await call('PATCH', ownerPath, { token: owner.token, body: { role: 'admin' } }), 409, 'owner_cannot_be_demoted');
    expectErrorBody(await call('DELETE', ownerPath, { token: owner.token }), 409, 'owner_cannot_leave');
    expectErrorBody(await call('PATCH', ownerPath, { token: admin.token, body: { role: 'developer' } }), 403, 'forbidden');
    expectErrorBody(await call('DELETE', ownerPath, { token: admin.token }), 403, 'forbidden');
    // Ownership is never granted by a role change.
    expectErrorBody(
      await call('PATCH', `/v1/organizations/${orgId}/members/${admin.userId}`, { token: owner.token, body: { role: 'owner' } }),
      400,
      'invalid_request',
      'role',
    );
    expectErrorBody(
      await call('PATCH', `/v1/organizations/${orgId}/members/${admin.userId}`, { token: owner.token, body: { role: 'boss' } }),
      400,
      'invalid_request',
      'role',
    );
    expect(await owners(orgId)).toEqual([owner.userId]);
  });

  it('leaves exactly one owner after concurrent transfers', async () => {
    const owner = await world.user('c-owner');
    const candidates = [await world.user('c-one'), await world.user('c-two'), await world.user('c-three')];
    for (let round = 0; round < 4; round += 1) {
      const { orgId, name } = await newOrganization(owner);
      for (const candidate of candidates) await join(owner, orgId, name, candidate, 'admin');
      const results = await Promise.all(
        candidates.map((candidate) =>
          call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: { new_owner_user_id: candidate.userId } }),
        ),
      );
      const statuses = results.map((r) => r.status).sort();
      // One transfer wins; the others find their caller is no longer the owner.
      expect(statuses, results.map((r) => r.text).join('\n')).toEqual([200, 403, 403]);
      const winner = candidates[results.findIndex((r) => r.status === 200)];
      expect(await owners(orgId)).toEqual([winner.userId]);
      const members = await call('GET', `/v1/organizations/${orgId}/members`, { token: winner.token });
      expect(members.json.data.filter((m: { role: string }) => m.role === 'owner')).toHaveLength(1);
    }
  });

  it('keeps one owner when the new owner deactivates while ownership moves to them', async () => {
    for (let round = 0; round < 3; round++) {
      const owner = await world.user(`race-owner-${round}`);
      const admin = await world.user(`race-admin-${round}`);
      const { orgId, name } = await newOrganization(owner);
      await join(owner, orgId, name, admin, 'admin');
      const [transfer, deactivate] = await Promise.all([
        call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: owner.token, body: { new_owner_user_id: admin.userId } }),
        call('POST', '/v1/account/deactivate', { token: admin.token, body: { password: admin.password } }),
      ]);
      if (transfer.status === 200) {
        // The transfer came first: the new owner must hand the organization on before leaving.
        expectErrorBody(deactivate, 409, 'ownership_transfer_required');
        expect(await owners(orgId)).toEqual([admin.userId]);
      } else {
        // The deactivation came first: the admin is no member any more.
        expect(deactivate.status, deactivate.text).toBe(202);
        expectErrorBody(transfer, 422, 'not_a_member');
        expect(await owners(orgId)).toEqual([owner.userId]);
      }
    }
  });

  it('deactivates the owner of a shared personal workspace: it goes with the account, its members and invitations end', async () => {
    const owner = await world.user('shared-personal-owner');
    const guest = await world.user('shared-personal-guest');
    const orgId = owner.personalWorkspaceId;
    const { name } = (await call('GET', `/v1/organizations/${orgId}`, { token: owner.token })).json;
    await join(owner, orgId, name, guest, 'developer');
    const pending = await call('POST', `/v1/organizations/${orgId}/invitations`, {
      token: owner.token,
      body: { email: `later-${Date.now()}@example.com`, role: 'developer' },
    });
    expect(pending.status, pending.text).toBe(201);

    // A personal workspace cannot be transferred, so it must not block the deactivation with a transfer demand.
    const deactivated = await call('POST', '/v1/account/deactivate', { token: owner.token, body: { password: owner.password } });
    expect(deactivated.status, deactivated.text).toBe(202);

    expect(await db('memberships').where({ org_id: orgId }).select('user_id')).toEqual([{ user_id: owner.userId }]);
    const invitation = await call('GET', `/v1/organizations/${orgId}/invitations`, { token: guest.token });
    expectErrorBody(invitation, 404);
    expect(await db('invitations').where({ id: pending.json.invitation_id }).whereNull('revoked_at').select('id')).toEqual([]);
    expect((await outboxEvents(orgId, 'organization.member.removed')).map((event) => event.data)).toEqual([
      { org_id: orgId, user_id: guest.userId, removed_by: owner.userId },
    ]);
    await eventually(async () => {
      const listed = await call('GET', '/v1/organizations', { token: guest.token });
      return listed.json.data.every((o: { org_id: string }) => o.org_id !== orgId) || undefined;
    }, 'the guest no longer lists the workspace');
  });

  it('lets the new owner and the old owner race in opposite directions and still keeps one owner', async () => {
    const a = await world.user('r-a');
    const b = await world.user('r-b');
    const { orgId, name } = await newOrganization(a);
    await join(a, orgId, name, b, 'admin');
    expect((await call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: a.token, body: { new_owner_user_id: b.userId } })).status).toBe(200);
    // b (owner) transfers back while a (now admin) tries to transfer to b again.
    await Promise.all([
      call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: b.token, body: { new_owner_user_id: a.userId } }),
      call('POST', `/v1/organizations/${orgId}/transfer-ownership`, { token: a.token, body: { new_owner_user_id: b.userId } }),
    ]);
    expect(await owners(orgId)).toHaveLength(1);
  });
});

describe('members', () => {
  it('changes roles at or below the granter, lets a member leave, and emits organization.member.removed', async () => {
    const owner = await world.user('m-owner');
    const admin = await world.user('m-admin');
    const dev = await world.user('m-dev');
    const leaver = await world.user('m-leaver');
    const { orgId, name } = await newOrganization(owner);
    await join(owner, orgId, name, admin, 'admin');
    await join(owner, orgId, name, dev, 'developer');
    await join(owner, orgId, name, leaver, 'developer');

    const promoted = await call('PATCH', `/v1/organizations/${orgId}/members/${dev.userId}`, { token: admin.token, body: { role: 'admin' } });
    expect(promoted.status).toBe(200);
    expect(promoted.json).toMatchObject({ user_id: dev.userId, org_id: orgId, email: dev.email, role: 'admin', joined_at: expect.any(String) });
    expectErrorBody(
      await call('PATCH', `/v1/organizations/${orgId}/members/usr_nobody`, { token: admin.token, body: { role: 'admin' } }),
      404,
      'member_not_found',
    );

    // A developer may leave by itself (no manager role needed), not remove others.
    expectErrorBody(await call('DELETE', `/v1/organizations/${orgId}/members/${dev.userId}`, { token: leaver.token }), 403, 'forbidden');
    expect((await call('DELETE', `/v1/organizations/${orgId}/members/${leaver.userId}`, { token: leaver.token })).status).toBe(204);
    expect((await call('DELETE', `/v1/organizations/${orgId}/members/${dev.userId}`, { token: admin.token })).status).toBe(204);
    expectErrorBody(await call('GET', `/v1/organizations/${orgId}`, { token: dev.token }), 404, 'organization_not_found');

    const removed = await outboxEvents(orgId, 'organization.member.removed');
    expect(removed.map((e) => e.data)).toEqual([
      { org_id: orgId, user_id: leaver.userId, removed_by: leaver.userId },
      { org_id: orgId, user_id: dev.userId, removed_by: admin.userId },
    ]);
    const added = await outboxEvents(orgId, 'organization.member.added');
    expect(added.map((e) => e.data.user_id)).toEqual([owner.userId, admin.userId, dev.userId, leaver.userId]);
    // The relay publishes them to JetStream.
    await eventually(async () => {
      const pending = await db('outbox').whereRaw(`payload->>'workspace_id' = ?`, [orgId]).whereNull('published_at').count<{ count: string }[]>('* as count');
      return Number(pending[0].count) === 0 ? true : undefined;
    }, 'the outbox relay to publish the events');
  });

  it('stops a removed or demoted member on the very next request (the role cache is dropped)', async () => {
    const owner = await world.user('x-owner');
    const member = await world.user('x-member');
    const { orgId, name } = await newOrganization(owner);
    await join(owner, orgId, name, member, 'admin');
    // A top-up is for owners and admins: the gateway's role for the workspace decides.
    const asMember = () =>
      call('POST', '/v1/billing/topup', { token: member.token, headers: { 'x-workspace-id': orgId }, body: { amount_usd: 5, idempotency_key: 'k1' } });
    expect((await asMember()).status).toBe(201);
    // Demoted to developer: refused from the very next request on.
    expect((await call('PATCH', `/v1/organizations/${orgId}/members/${member.userId}`, { token: owner.token, body: { role: 'developer' } })).status).toBe(200);
    expectErrorBody(await asMember(), 403, 'forbidden');
    expect((await call('GET', '/v1/account', { token: member.token, headers: { 'x-workspace-id': orgId } })).status).toBe(200);
    expect((await call('DELETE', `/v1/organizations/${orgId}/members/${member.userId}`, { token: owner.token })).status).toBe(204);
    expectErrorBody(await call('GET', '/v1/account', { token: member.token, headers: { 'x-workspace-id': orgId } }), 404, 'workspace_not_found');
  });
});

describe('invitations', () => {
  it('never invites an owner (400 on role) and needs a valid email', async () => {
    const owner = await world.user('i-owner');
    const { orgId } = await newOrganization(owner);
    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: 'x@example.com', role: 'owner' } }),
      400,
      'invalid_request',
      'role',
    );
    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: 'not-an-email', role: 'admin' } }),
      400,
      'invalid_request',
      'email',
    );
    expectErrorBody(
      await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: owner.email, role: 'admin' } }),
      409,
      'already_a_member',
      'email',
    );
  });

  it('accepts with the invited account only; the member appears with the invited role; tokens are single use', async () => {
    const owner = await world.user('a-owner');
    const invitee = await world.user('a-invitee');
    const other = await world.user('a-other');
    const { orgId, name } = await newOrganization(owner);
    const invitation = await call('POST', `/v1/organizations/${orgId}/invitations`, {
      token: owner.token,
      body: { email: invitee.email.toUpperCase(), role: 'admin' },
    });
    expect(invitation.status).toBe(201);
    expect(invitation.json).toEqual({
      invitation_id: expect.stringMatching(/^inv_/),
      org_id: orgId,
      email: invitee.email,
      role: 'admin',
      status: 'pending',
      invited_by: owner.userId,
      created_at: expect.any(String),
      expires_at: expect.any(String),
    });
    const token = await mailbox.invitationToken(invitee.email, name);
    const mail = await mailbox.waitFor((m) => m.kind === 'invitation' && m.to === invitee.email, 'the invitation');
    expect(await tokenOfLink(mail, mesh.env.PUBLIC_BASE_URL, '/app/invitations/accept')).toBe(token);
    // Stored hashed: the token is nowhere in the database.
    expect(JSON.stringify(await db('invitations').where({ org_id: orgId }).select('*'))).not.toContain(token);

    expectErrorBody(await world.accept(other, token), 403, 'invitation_email_mismatch');
    expectErrorBody(await world.accept(invitee, 'not-a-real-token'), 400, 'invalid_token', 'token');
    const accepted = await world.accept(invitee, token);
    expect(accepted.status).toBe(200);
    expect(accepted.json).toMatchObject({ user_id: invitee.userId, org_id: orgId, email: invitee.email, role: 'admin' });
    const reused = await world.accept(invitee, token);
    expectErrorBody(reused, 400, 'invalid_token', 'token');
    expect(reused.json.error.message).toMatch(/used already/);

    const members = await call('GET', `/v1/organizations/${orgId}/members`, { token: owner.token });
    expect(members.json.data).toContainEqual(expect.objectContaining({ user_id: invitee.userId, email: invitee.email, role: 'admin' }));
    const list = await call('GET', `/v1/organizations/${orgId}/invitations`, { token: invitee.token });
    expect(list.json.data).toEqual([expect.objectContaining({ invitation_id: invitation.json.invitation_id, status: 'accepted' })]);
    const added = await outboxEvents(orgId, 'organization.member.added');
    expect(added.at(-1)!.data).toEqual({ org_id: orgId, user_id: invitee.userId, role: 'admin', invitation_id: invitation.json.invitation_id });
  });

  it('accepts a token once under concurrent attempts', async () => {
    const owner = await world.user('k-owner');
    const invitee = await world.user('k-invitee');
    const { orgId, name } = await newOrganization(owner);
    const { token } = await world.invite(owner, orgId, name, invitee.email, 'developer');
    const results = await Promise.all([0, 1, 2].map(() => world.accept(invitee, token)));
    expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join('\n')).toEqual([200, 400, 400]);
    const members = await call('GET', `/v1/organizations/${orgId}/members`, { token: owner.token });
    expect(members.json.data.filter((m: { user_id: string }) => m.user_id === invitee.userId)).toHaveLength(1);
    expect((await outboxEvents(orgId, 'organization.member.added')).filter((e) => e.data.user_id === invitee.userId)).toHaveLength(1);
  });

  it('refuses revoked and expired invitations with invalid_token', async () => {
    const owner = await world.user('e-owner');
    const invitee = await world.user('e-invitee');
    const { orgId, name } = await newOrganization(owner);

    const revoked = await world.invite(owner, orgId, name, invitee.email, 'developer');
    expect((await call('DELETE', `/v1/organizations/${orgId}/invitations/${revoked.invitationId}`, { token: owner.token })).status).toBe(204);
    const refused = await world.accept(invitee, revoked.token);
    expectErrorBody(refused, 400, 'invalid_token', 'token');
    expect(refused.json.error.message).toMatch(/revoked/);
    expectErrorBody(await call('DELETE', `/v1/organizations/${orgId}/invitations/inv_nothing`, { token: owner.token }), 404, 'invitation_not_found');

    // INVITATION_TTL is 3 s in this mesh.
    const expiring = await world.invite(owner, orgId, name, invitee.email, 'developer');
    await eventually(
      async () => {
        const list = await call('GET', `/v1/organizations/${orgId}/invitations`, { token: owner.token });
        const found = list.json.data.find((i: { invitation_id: string }) => i.invitation_id === expiring.invitationId);
        return found?.status === 'expired' ? found : undefined;
      },
      'the invitation to expire',
      10_000,
    );
    const expired = await world.accept(invitee, expiring.token);
    expectErrorBody(expired, 400, 'invalid_token', 'token');
    expect(expired.json.error.message).toMatch(/expired/);
    const statuses = (await call('GET', `/v1/organizations/${orgId}/invitations`, { token: owner.token })).json.data.map((i: { status: string }) => i.status);
    expect(statuses).toEqual(['expired', 'revoked']);

    // Tokens are mailed, never logged.
    const logs = (['identity', 'gateway'] as const).map((component) => mesh.output(component)).join('\n');
    for (const token of [revoked.token, expiring.token]) expect(logs).not.toContain(token);
  });
});
