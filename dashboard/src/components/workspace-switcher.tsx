import { useId } from 'react';
import { useSession } from '../session';

/** Picks the workspace the pages act in (sent as `X-Workspace-Id`), with the user's role there. */
export function WorkspaceSwitcher() {
  const { workspaces, workspace, role, selectWorkspace } = useSession();
  const id = useId();
  return (
    <div className="workspace-switcher">
      <label htmlFor={id}>Workspace</label>
      <select id={id} value={workspace?.org_id ?? ''} onChange={(event) => selectWorkspace(event.target.value)}>
        {workspaces.map((candidate) => (
          <option key={candidate.org_id} value={candidate.org_id}>
            {candidate.personal ? `${candidate.name} (personal)` : candidate.name}
          </option>
        ))}
      </select>
      {role && (
        <span className="role" data-role={role}>
          Role: {role}
        </span>
      )}
    </div>
  );
}
