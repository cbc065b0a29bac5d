import { paginate } from '@switchboard/sdk';
import { useState } from 'react';
import { Checkbox } from '../../components/checkbox';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import type { Member } from './members-section';

/** Handing the organization to another member (the owner only, never a personal workspace); the owner becomes an admin. */
export function TransferSection({ version, onTransferred }: { version: number; onTransferred(text: string): void }) {
  const { client, workspace, account } = useSignedIn();
  const candidates = useLoad(
    async () =>
      (
        await paginate((after) =>
          client.get('/v1/organizations/{org_id}/members', { params: { path: { org_id: workspace.org_id }, query: { limit: 100, after } } }),
        ).collect()
      ).filter((member) => member.user_id !== account.user_id),
    [client, workspace.org_id, account.user_id, version],
  );
  return (
    <Section title="Transfer ownership" danger>
      <p>The new owner must be a member already. You become an admin; only the new owner can hand it back.</p>
      <Loaded state={candidates} what="Loading the members">
        {(members) =>
          members.length === 0 ? (
            <p className="hint">Invite someone first: only a member can become the owner.</p>
          ) : (
            <TransferForm members={members} onTransferred={onTransferred} />
          )
        }
      </Loaded>
    </Section>
  );
}

function TransferForm({ members, onTransferred }: { members: Member[]; onTransferred(text: string): void }) {
  const { client, workspace, reloadWorkspaces } = useSignedIn();
  const [newOwner, setNewOwner] = useState(members[0].user_id);
  const [confirmed, setConfirmed] = useState(false);
  const submit = async () => {
    if (!confirmed) throw fieldError('confirm', 'Tick the box to confirm that you hand the organization over.');
    await client.post('/v1/organizations/{org_id}/transfer-ownership', {
      params: { path: { org_id: workspace.org_id } },
      body: { new_owner_user_id: newOwner },
    });
    const chosen = members.find((member) => member.user_id === newOwner);
    // The role shown in the switcher and the controls of this page follow the new role.
    await reloadWorkspaces();
    onTransferred(`${chosen?.email ?? newOwner} is now the owner of ${workspace.name}; you are an admin.`);
  };
  return (
    <Form onSubmit={submit} submitLabel="Transfer ownership" busyLabel="Transferring…" danger label="Transfer ownership">
      <Field
        name="new_owner_user_id"
        label="New owner"
        value={newOwner}
        onChange={setNewOwner}
        options={members.map((member) => ({ value: member.user_id, label: `${member.full_name ?? member.email} (${member.email}, ${member.role})` }))}
        required
      />
      <Checkbox name="confirm" label={`I understand that I stop being the owner of ${workspace.name}.`} checked={confirmed} onChange={setConfirmed} />
    </Form>
  );
}
