import { Section } from '../../components/section';
import { formatDate } from '../../format';
import { useSignedIn } from '../../session';
import { roleLabels } from './roles';

/** The current workspace: what it is, and the user's role in it. */
export function OverviewSection() {
  const { workspace, role } = useSignedIn();
  return (
    <Section title={workspace.name}>
      <dl className="facts">
        <dt>Your role</dt>
        <dd>{roleLabels[role] ?? role}</dd>
        <dt>Organization id</dt>
        <dd>
          <code>{workspace.org_id}</code>
        </dd>
        <dt>Created</dt>
        <dd>{formatDate(workspace.created_at)}</dd>
      </dl>
      {workspace.personal && (
        <p className="hint">
          This is your personal workspace: it goes with your account, so its ownership cannot move and it cannot be deleted. You can still invite people to it.
        </p>
      )}
    </Section>
  );
}
