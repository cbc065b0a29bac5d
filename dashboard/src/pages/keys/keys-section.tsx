import type { Schemas } from '@switchboard/sdk';
import { useState } from 'react';
import type { KeyStatus as KeyStatusFilter } from '../../closed-sets';
import { Empty } from '../../components/empty';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { SelectControl } from '../../components/select-control';
import { formatDate, formatDateTime } from '../../format';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { usePages } from '../../use-pages';
import { isExpired, keyScopes, scopesLabel } from './key-words';
import { routingPolicyLabel } from './routing-policies';
import { SpendBar } from './spend-bar';

export type Key = Schemas['switchboard.keys.v1.Key'];

const filters = [
  { value: '', label: 'All keys' },
  { value: 'active', label: 'Active' },
  { value: 'revoked', label: 'Revoked' },
];

/** The workspace's keys, newest first, a page at a time, with their status (and expiry), scopes when not all, and this month's spend. */
export function KeysSection({ version }: { version: number }) {
  const { client } = useSignedIn();
  const [status, setStatus] = useState('');
  const keys = usePages(
    (after) => client.get('/v1/keys', { params: { query: { limit: 20, after, ...(status ? { status: status as KeyStatusFilter } : {}) } } }),
    [client, status, version],
  );
  return (
    <Section title="Keys">
      <SelectControl label="Show" value={status} options={filters} onChange={setStatus} />
      <Loaded state={keys} what="Loading the keys">
        {(list) =>
          list.length === 0 ? (
            <Empty title={status ? `No ${status} keys` : 'No keys yet'}>{!status && <p>Create the first one above.</p>}</Empty>
          ) : (
            <table className="data-table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Key</th>
                  <th scope="col">Status</th>
                  <th scope="col">Spend this month</th>
                  <th scope="col">Routing</th>
                  <th scope="col">Last used</th>
                </tr>
              </thead>
              <tbody>
                {list.map((key) => (
                  <tr key={key.key_id}>
                    <th scope="row">
                      <Link to={`/keys/${key.key_id}`}>{key.name}</Link>
                      <div className="muted small">Created {formatDate(key.created_at)}</div>
                      {key.scopes.length < keyScopes.length && <div className="muted small">Scopes: {scopesLabel(key.scopes)}</div>}
                    </th>
                    <td className="nowrap">
                      <code>{key.hint}</code>
                    </td>
                    <td className="nowrap">
                      <KeyStatus keyRecord={key} />
                      {key.status === 'active' && key.expires_at && !isExpired(key.expires_at) && (
                        <div className="muted small">until {formatDateTime(key.expires_at)}</div>
                      )}
                    </td>
                    <td className="spend-cell">
                      <SpendBar spend={key.month_to_date_spend_usd} cap={key.monthly_spend_cap_usd} />
                    </td>
                    <td>{routingPolicyLabel(key.routing_policy)}</td>
                    <td>{key.last_used_at ? formatDateTime(key.last_used_at) : <span className="muted">Never</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={keys} what="keys" />
    </Section>
  );
}

/** The key's standing: revoked, expired (its status stays `active`: status is about revocation), or active. */
export function KeyStatus({ keyRecord }: { keyRecord: Key }) {
  if (keyRecord.status !== 'active') return <span className="badge bad">revoked</span>;
  return isExpired(keyRecord.expires_at) ? <span className="badge bad">expired</span> : <span className="badge ok">active</span>;
}
