import { Mailbox } from '@switchboard/testkit/mailbox';
import type { RestCall, SignedUp } from '@switchboard/testkit/mesh';
import { expect } from 'vitest';

/**
 * A new organization of `owner` that `member` joined with `role`, over REST: the invitation's
 * token is read from the mail the mesh wrote to `mailboxDir`, as the invitee would.
 */
export async function organizationWithMember(
  call: RestCall,
  mailboxDir: string,
  owner: SignedUp,
  member: SignedUp,
  role = 'developer',
): Promise<{ orgId: string; name: string }> {
  const name = `Org ${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const created = await call('POST', '/v1/organizations', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  const orgId: string = created.json.organization.org_id;
  const invited = await call('POST', `/v1/organizations/${orgId}/invitations`, { token: owner.token, body: { email: member.email, role } });
  expect(invited.status, invited.text).toBe(201);
  const token = await new Mailbox(mailboxDir).invitationToken(member.email, name);
  const accepted = await call('POST', '/v1/invitations/accept', { token: member.token, body: { token } });
  expect(accepted.status, accepted.text).toBe(200);
  return { orgId, name };
}
