import { useState } from 'react';
import { Empty } from '../components/empty';
import { LoadMore } from '../components/load-more';
import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { SelectControl } from '../components/select-control';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { usePages } from '../use-pages';
import { GenerationsTable } from './activity/generations-table';

/**
 * The workspace's recent generations (each model request its keys made), newest first, a page at
 * a time, optionally of one key: model, tokens, cost, latency and the feedback given.
 */
export function ActivityPage() {
  const { client, role, workspace } = useSignedIn();
  const [keyId, setKeyId] = useState('');
  const readsKeys = can(role, 'keys.read');
  const keys = useLoad(async () => (readsKeys ? (await client.get('/v1/keys', { params: { query: { limit: 100 } } })).data : []), [client, readsKeys]);
  const keyNames = new Map(keys.status === 'done' ? keys.data.map((key) => [key.key_id, key.name]) : []);
  const generations = usePages(
    (after) => client.get('/v1/generations', { params: { query: { limit: 25, after, ...(keyId ? { key_id: keyId } : {}) } } }),
    [client, keyId],
  );
  return (
    <Page title="Activity">
      <p>The model requests made with the keys of {workspace.name}, newest first. Costs are exact, as billed.</p>
      {keys.status === 'done' && keys.data.length > 0 && (
        <SelectControl
          label="Key"
          value={keyId}
          options={[{ value: '', label: 'Every key' }, ...keys.data.map((key) => ({ value: key.key_id, label: `${key.name} (${key.hint})` }))]}
          onChange={setKeyId}
        />
      )}
      <Loaded state={generations} what="Loading the activity">
        {(list) =>
          list.length === 0 ? (
            <Empty title="No requests yet">
              <p>
                Requests to <code>/v1/chat/completions</code> with a key of this workspace show here. Try one in the <Link to="/playground">Playground</Link>.
              </p>
            </Empty>
          ) : (
            <GenerationsTable generations={list} keyNames={keyNames} />
          )
        }
      </Loaded>
      <LoadMore pages={generations} what="requests" />
    </Page>
  );
}
