import { useEffect, useState } from 'react';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { can } from '../permissions';
import { useRouter } from '../router';
import { useSignedIn } from '../session';
import { usePages } from '../use-pages';
import { CreateSection } from './organization/create-section';
import { DeleteSection } from './organization/delete-section';
import { InvitationsSection } from './organization/invitations-section';
import { InviteSection } from './organization/invite-section';
import { JoinSection } from './organization/join-section';
import { MembersSection } from './organization/members-section';
import { OverviewSection } from './organization/overview-section';
import { roleLabels } from './organization/roles';
import { TransferSection } from './organization/transfer-section';

/** What the page says after it moved the user to another workspace (`?welcome=…`; `from` names the one left). */
function welcomeText(query: URLSearchParams, workspaceName: string, role: string): string | undefined {
  const from = query.get('from') ?? 'the organization';
  switch (query.get('welcome')) {
    case 'joined':
      return `You joined ${workspaceName} as ${roleLabels[role] ?? role}; it is now the current workspace.`;
    case 'created':
      return `${workspaceName} is created and you are its owner; it is now the current workspace. Invite its members below.`;
    case 'left':
      return `You left ${from}. This is your personal workspace.`;
    case 'deleted':
      return `${from} is deleted. This is your personal workspace.`;
    default:
      return undefined;
  }
}

/**
 * The current workspace as an organization: its members and roles, invitations, ownership, and
 * (for any user) joining or creating another one. Each control shows only for the roles the API
 * allows it to.
 */
export function OrganizationPage() {
  const { client, workspace, role, reloadWorkspaces } = useSignedIn();
  const { location } = useRouter();
  // Another member may have changed this user's role (a promotion, a transfer to them) since
  // sign-in: the controls follow the role the API holds now.
  useEffect(() => {
    void reloadWorkspaces().catch(() => {});
  }, [reloadWorkspaces]);
  const [notice, setNotice] = useState<string>();
  const welcome = welcomeText(location.query, workspace.name, role);
  const [version, setVersion] = useState(0);
  const path = { org_id: workspace.org_id };
  const members = usePages(
    (after) => client.get('/v1/organizations/{org_id}/members', { params: { path, query: { limit: 50, after } } }),
    [client, workspace.org_id, version],
  );
  const canReadInvitations = can(role, 'invitations.read');
  const invitations = usePages(
    async (after) =>
      canReadInvitations
        ? client.get('/v1/organizations/{org_id}/invitations', { params: { path, query: { limit: 50, after } } })
        : { data: [], has_more: false, next_cursor: null },
    [client, workspace.org_id, canReadInvitations, version],
  );
  const reload = () => setVersion((n) => n + 1);
  return (
    <Page title="Organization">
      {(notice ?? welcome) && <Notice>{notice ?? welcome}</Notice>}
      <OverviewSection />
      <MembersSection members={members} onChanged={reload} />
      {can(role, 'members.invite') && <InviteSection onInvited={reload} />}
      {canReadInvitations && <InvitationsSection invitations={invitations} onChanged={reload} />}
      {can(role, 'organization.transfer_ownership') && !workspace.personal && (
        <TransferSection
          version={version}
          onTransferred={(text) => {
            setNotice(text);
            reload();
          }}
        />
      )}
      <JoinSection />
      <CreateSection />
      {can(role, 'organization.delete') && !workspace.personal && <DeleteSection />}
    </Page>
  );
}
