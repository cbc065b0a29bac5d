import type { Schemas } from '@switchboard/sdk';
import { useState } from 'react';
import { ConfirmAction } from '../../components/confirm-action';
import { Empty } from '../../components/empty';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { TableHead } from '../../components/table-head';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { PagesState } from '../../use-pages';
import { roleLabels } from './roles';

export type Invitation = Schemas['switchboard.identity.v1.Invitation'];

const statusBadges: Record<string, string> = { pending: 'badge warn', accepted: 'badge ok', expired: 'badge muted', revoked: 'badge muted' };

/** The invitations with their status (the owner and admins); a pending one can be revoked. */
export function InvitationsSection({ invitations, onChanged }: { invitations: PagesState<Invitation>; onChanged(): void }) {
  const { client, workspace, role } = useSignedIn();
  const [notice, setNotice] = useState<string>();
  const revoke = async (invitation: Invitation) => {
    await client.delete('/v1/organizations/{org_id}/invitations/{invitation_id}', {
      params: { path: { org_id: workspace.org_id, invitation_id: invitation.invitation_id } },
    });
    setNotice(`The invitation of ${invitation.email} is revoked: its token no longer works.`);
    onChanged();
  };
  return (
    <Section title="Invitations">
      {notice && <Notice>{notice}</Notice>}
      <Loaded state={invitations} what="Loading the invitations">
        {(list) =>
          list.length === 0 ? (
            <Empty title="No invitations yet">
              <p>Invite someone above: they get a mail with a token to join.</p>
            </Empty>
          ) : (
            <table className="data-table">
              <TableHead columns={['Email address', 'Role', 'Status', 'Sent', 'Expires']} actions="Actions" />
              <tbody>
                {list.map((invitation) => (
                  <tr key={invitation.invitation_id}>
                    <th scope="row">{invitation.email}</th>
                    <td>{roleLabels[invitation.role] ?? invitation.role}</td>
                    <td>
                      <span className={statusBadges[invitation.status] ?? 'badge'}>{invitation.status}</span>
                    </td>
                    <td>{formatDateTime(invitation.created_at)}</td>
                    <td>{formatDateTime(invitation.expires_at)}</td>
                    <td className="actions">
                      {invitation.status === 'pending' && can(role, 'invitations.revoke') && (
                        <ConfirmAction
                          label="Revoke"
                          target={`the invitation of ${invitation.email}`}
                          question={`Revoke the invitation of ${invitation.email}? Its token stops working at once.`}
                          onConfirm={() => revoke(invitation)}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={invitations} what="invitations" />
    </Section>
  );
}
