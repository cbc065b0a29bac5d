import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';

/**
 * Accepting an invitation: the token of the mail, pasted. The new organization becomes the
 * current workspace (the switcher lists it), and the page says so.
 */
export function JoinSection() {
  const { client, account, selectWorkspace, reloadWorkspaces } = useSignedIn();
  const { navigate } = useRouter();
  const [token, setToken] = useState('');
  const submit = async () => {
    const member = await client.post('/v1/invitations/accept', { body: { token: token.trim() } });
    await reloadWorkspaces();
    selectWorkspace(member.org_id);
    navigate('/organization?welcome=joined');
  };
  return (
    <Section title="Join an organization">
      <p>
        Paste the token of an invitation mailed to <strong>{account.email}</strong>. An invitation works once, for the address it was sent to.
      </p>
      <Form onSubmit={submit} submitLabel="Join" busyLabel="Joining…" label="Join an organization">
        <Field name="token" label="Invitation token" autoComplete="off" spellCheck={false} value={token} onChange={setToken} required />
      </Form>
    </Section>
  );
}
