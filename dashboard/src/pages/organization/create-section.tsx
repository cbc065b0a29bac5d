import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';

/** A new organization owned by the user; it becomes the current workspace. */
export function CreateSection() {
  const { client, selectWorkspace, reloadWorkspaces } = useSignedIn();
  const { navigate } = useRouter();
  const [name, setName] = useState('');
  const submit = async () => {
    const { organization } = await client.post('/v1/organizations', { body: { name } });
    await reloadWorkspaces();
    if (organization) selectWorkspace(organization.org_id);
    navigate('/organization?welcome=created');
  };
  return (
    <Section title="Create an organization">
      <p>A workspace of its own for a team: its own members, API keys, balance and webhooks. You are its owner.</p>
      <Form onSubmit={submit} submitLabel="Create organization" busyLabel="Creating…" label="Create an organization">
        <Field name="name" label="Name" hint="1 to 200 characters." autoComplete="organization" value={name} onChange={setName} required />
      </Form>
    </Section>
  );
}
