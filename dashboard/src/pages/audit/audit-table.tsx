import type { Schemas } from '@switchboard/sdk';
import { TableHead } from '../../components/table-head';
import { formatDateTime } from '../../format';
import { outcomeBadges } from './audit-actions';

export type AuditEvent = Schemas['switchboard.identity.v1.AuditEvent'];

/** A record's metadata as `name: value` pairs (ids, codes, counts, field names: never a secret). */
function metadataText(metadata: Record<string, unknown>): string {
  return Object.entries(metadata)
    .map(([name, value]) => `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join('; ');
}

/**
 * Audit records, newest first: when, what, who (and from which address), about what, how it
 * ended, and the request that caused it. `names` gives a person's or key's name by id.
 */
export function AuditTable({ events, names }: { events: AuditEvent[]; names: Map<string, string> }) {
  return (
    <table className="data-table audit-events">
      <TableHead columns={['Time', 'Action', 'Actor', 'Target', 'Outcome', 'Request id']} />
      <tbody>
        {events.map((event) => {
          const metadata = metadataText(event.metadata ?? {});
          const actorName = names.get(event.actor.id);
          return (
            <tr key={event.event_id}>
              <td className="nowrap">{formatDateTime(event.created_at)}</td>
              <th scope="row">
                <code>{event.action}</code>
                {metadata && <div className="muted small">{metadata}</div>}
              </th>
              <td>
                {event.actor.type === 'system' ? (
                  'Switchboard'
                ) : (
                  <>
                    {actorName && <div>{actorName}</div>}
                    <code className={actorName ? 'muted small' : undefined}>{event.actor.id}</code>
                  </>
                )}
                <div className="muted small">
                  {event.actor.type === 'api_key' ? 'API key' : event.actor.type}
                  {event.actor.ip ? `, from ${event.actor.ip}` : ''}
                </div>
              </td>
              <td>
                {event.target ? (
                  <>
                    {names.has(event.target.id) && <div>{names.get(event.target.id)}</div>}
                    <span className="muted small">{event.target.type}</span> <code>{event.target.id}</code>
                  </>
                ) : (
                  '—'
                )}
              </td>
              <td>
                <span className={outcomeBadges[event.outcome] ?? 'badge'}>{event.outcome}</span>
              </td>
              <td>{event.request_id ? <code className="small">{event.request_id}</code> : '—'}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
