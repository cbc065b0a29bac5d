import type { Schemas } from '@switchboard/sdk';
import { useState } from 'react';
import type { GrantableRole } from '../../closed-sets';
import { ConfirmAction } from '../../components/confirm-action';
import { Empty } from '../../components/empty';
import { ExpandableRow } from '../../components/expandable-row';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { TableHead } from '../../components/table-head';
import { formatDate } from '../../format';
import { can } from '../../permissions';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';
import type { PagesState } from '../../use-pages';
import { assignableRoles, outranksOrEquals, roleLabels } from './roles';

export type Member = Schemas['switchboard.identity.v1.Member'];

/**
 * The members with their roles. The owner and admins manage the members at or below their own
 * role (change the role, remove); anyone but the owner may leave.
 */
export function MembersSection({ members, onChanged }: { members: PagesState<Member>; onChanged(): void }) {
  const { account, role } = useSignedIn();
  const [open, setOpen] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const manageable = (member: Member) =>
    member.user_id !== account.user_id && outranksOrEquals(role, member.role) && (can(role, 'members.update_role') || can(role, 'members.remove'));
  return (
    <Section title="Members">
      {notice && <Notice>{notice}</Notice>}
      <Loaded state={members} what="Loading the members">
        {(list) =>
          list.length === 0 ? (
            <Empty title="No members" />
          ) : (
            <table className="data-table">
              <TableHead columns={['Name', 'Email address', 'Role', 'Joined']} actions="Actions" />
              <tbody>
                {list.map((member) => {
                  const isOpen = open === member.user_id;
                  const self = member.user_id === account.user_id;
                  return (
                    <ExpandableRow
                      key={member.user_id}
                      columns={5}
                      panelId={`member-${member.user_id}`}
                      open={isOpen}
                      onToggle={() => setOpen(isOpen ? undefined : member.user_id)}
                      toggle={manageable(member) ? { label: 'Manage', openLabel: 'Close', target: member.email } : undefined}
                      actions={self && member.role !== 'owner' && can(role, 'members.leave') && <Leave member={member} />}
                      cells={
                        <>
                          <th scope="row">
                            {member.full_name ?? <span className="muted">No name</span>}
                            {self && <span className="muted"> (you)</span>}
                          </th>
                          <td>{member.email}</td>
                          <td>{roleLabels[member.role] ?? member.role}</td>
                          <td>{formatDate(member.joined_at)}</td>
                        </>
                      }
                      panel={
                        <ManageMember
                          member={member}
                          onChanged={(text) => {
                            setOpen(undefined);
                            setNotice(text);
                            onChanged();
                          }}
                        />
                      }
                    />
                  );
                })}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={members} what="members" />
    </Section>
  );
}

function ManageMember({ member, onChanged }: { member: Member; onChanged(text: string): void }) {
  const { client, workspace, role } = useSignedIn();
  const [newRole, setNewRole] = useState<string>(member.role);
  const path = { org_id: workspace.org_id, user_id: member.user_id };
  const changeRole = async () => {
    const updated = await client.patch('/v1/organizations/{org_id}/members/{user_id}', { params: { path }, body: { role: newRole as GrantableRole } });
    onChanged(`${member.email} is now ${roleLabels[updated.role] ?? updated.role}.`);
  };
  const remove = async () => {
    await client.delete('/v1/organizations/{org_id}/members/{user_id}', { params: { path } });
    onChanged(`${member.email} is no longer a member; their API keys in ${workspace.name} are revoked.`);
  };
  return (
    <div className="panel">
      {can(role, 'members.update_role') && (
        <Form onSubmit={changeRole} submitLabel="Change role" busyLabel="Changing…" label={`Change the role of ${member.email}`}>
          <Field
            name="role"
            label={`Role of ${member.email}`}
            value={newRole}
            onChange={setNewRole}
            options={assignableRoles(role)}
            hint="Applies from their next request."
            required
          />
        </Form>
      )}
      {can(role, 'members.remove') && (
        <ConfirmAction
          label="Remove from the organization"
          confirmLabel="Remove"
          question={`Remove ${member.email} from ${workspace.name}? Their API keys in this organization are revoked, and their access ends with their next request.`}
          onConfirm={remove}
        />
      )}
    </div>
  );
}

/** Leaving: the member's keys in the organization are revoked; the personal workspace takes over. */
function Leave({ member }: { member: Member }) {
  const { client, workspace, account, selectWorkspace, reloadWorkspaces } = useSignedIn();
  const { navigate } = useRouter();
  const leave = async () => {
    await client.delete('/v1/organizations/{org_id}/members/{user_id}', { params: { path: { org_id: workspace.org_id, user_id: member.user_id } } });
    // The personal workspace first: requests naming the one left would be refused from now on.
    selectWorkspace(account.personal_workspace_id);
    navigate(`/organization?welcome=left&from=${encodeURIComponent(workspace.name)}`);
    await reloadWorkspaces();
  };
  return (
    <ConfirmAction
      label="Leave"
      confirmLabel="Leave the organization"
      question={`Leave ${workspace.name}? Your API keys in it are revoked; to come back you need a new invitation.`}
      onConfirm={leave}
    />
  );
}
