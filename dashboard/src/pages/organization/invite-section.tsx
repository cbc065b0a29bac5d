import { useState } from 'react';
import type { GrantableRole } from '../../closed-sets';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { useSignedIn } from '../../session';
import { assignableRoles } from './roles';

/** Inviting someone by email with a role at or below the inviter's own (the owner and admins). */
export function InviteSection({ onInvited }: { onInvited(): void }) {
  const { client, workspace, role } = useSignedIn();
  const [email, setEmail] = useState('');
  const [newRole, setNewRole] = useState('developer');
  const [notice, setNotice] = useState<string>();
  const submit = async () => {
    setNotice(undefined);
    const invitation = await client.post('/v1/organizations/{org_id}/invitations', {
      params: { path: { org_id: workspace.org_id } },
      body: { email: email.trim(), role: newRole as GrantableRole },
    });
    setEmail('');
    setNotice(`An invitation to join as ${invitation.role} was mailed to ${invitation.email}; it is valid until ${formatDateTime(invitation.expires_at)}.`);
    onInvited();
  };
  return (
    <Section title="Invite a member">
      <p>
        The invitation mail holds a token, valid 7 days: the invitee signs in with that address and pastes it under <em>Join an organization</em>. A new
        invitation to the same address replaces the pending one.
      </p>
      <Form onSubmit={submit} submitLabel="Send invitation" busyLabel="Sending…" label="Invite a member">
        <Field name="email" label="Email address" type="email" autoComplete="off" value={email} onChange={setEmail} required />
        <Field name="role" label="Role" value={newRole} onChange={setNewRole} options={assignableRoles(role)} required />
      </Form>
      {notice && <Notice>{notice}</Notice>}
    </Section>
  );
}
