import { useState } from 'react';
import { Checkbox } from '../../components/checkbox';
import { Form, fieldError } from '../../components/form';
import { Section } from '../../components/section';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';

/** Deleting the organization (its owner; never a personal workspace), with what goes with it. */
export function DeleteSection() {
  const { client, workspace, account, selectWorkspace, reloadWorkspaces } = useSignedIn();
  const { navigate } = useRouter();
  const [confirmed, setConfirmed] = useState(false);
  const submit = async () => {
    if (!confirmed) throw fieldError('confirm', `Tick the box to confirm that ${workspace.name} goes for good.`);
    await client.delete('/v1/organizations/{org_id}', { params: { path: { org_id: workspace.org_id } } });
    // The personal workspace first: requests naming the one left would be refused from now on.
    selectWorkspace(account.personal_workspace_id);
    navigate(`/organization?welcome=deleted&from=${encodeURIComponent(workspace.name)}`);
    await reloadWorkspaces();
  };
  return (
    <Section title="Delete the organization" danger>
      <p>Its memberships and invitations are deleted, its API keys revoked and its webhooks disabled. This cannot be undone.</p>
      <Form onSubmit={submit} submitLabel="Delete organization" busyLabel="Deleting…" danger label="Delete the organization">
        <Checkbox name="confirm" label={`I understand that ${workspace.name} and its API keys go for good.`} checked={confirmed} onChange={setConfirmed} />
      </Form>
    </Section>
  );
}
