import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';

/**
 * Accepting an invitation: the token of the mail, pasted or filled in by its link (`mailed`).
 * The new organization becomes the current workspace (the switcher lists it), and the page says
 * so; `onJoined` runs first.
 */
export function JoinSection({ mailed = '', onJoined }: { mailed?: string; onJoined?(): void }) {
  const { client, account, selectWorkspace, reloadWorkspaces } = useSignedIn();
  const { navigate } = useRouter();
  const [token, setToken] = useState(mailed);
  const submit = async () => {
    const member = await client.post('/v1/invitations/accept', { body: { token: token.trim() } });
    onJoined?.();
    await reloadWorkspaces();
    selectWorkspace(member.org_id);
    navigate('/organization?welcome=joined');
  };
  return (
    <Section title="Join an organization">
      <p>
        {mailed ? 'The link of your invitation filled in its token.' : 'Paste the token of an invitation'} mailed to <strong>{account.email}</strong>. An
        invitation works once, for the address it was sent to.
      </p>
      <Form onSubmit={submit} submitLabel="Join" busyLabel="Joining…" label="Join an organization">
        <Field name="token" label="Invitation token" autoComplete="off" spellCheck={false} value={token} onChange={setToken} required />
      </Form>
    </Section>
  );
}
