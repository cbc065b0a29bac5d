import { useState } from 'react';
import { Page } from '../components/page';
import { can } from '../permissions';
import { useSignedIn } from '../session';
import { CreateKeySection } from './keys/create-key-section';
import { KeysSection } from './keys/keys-section';

/** The workspace's API keys: create one (shown once), and the list with each key's spend; a key's settings are on its own page. */
export function KeysPage() {
  const { role, workspace } = useSignedIn();
  const [version, setVersion] = useState(0);
  return (
    <Page title="API keys">
      <p>Keys authenticate model requests and API calls in {workspace.name}. A key acts as the person who created it, with their current role here.</p>
      {can(role, 'keys.create') && <CreateKeySection onCreated={() => setVersion((n) => n + 1)} />}
      <KeysSection version={version} />
    </Page>
  );
}
