import { useState } from 'react';
import type { AuditAction } from '../../closed-sets';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { auditActions } from './audit-actions';

/** The filters of `GET /v1/audit-events`, as the API names them; absent = not filtered. */
export interface AuditFilter {
  action?: AuditAction;
  actor_id?: string;
  since?: string;
  until?: string;
}

/** A datetime-local input's value (the reader's time) as RFC 3339; undefined when empty. */
function instant(name: 'since' | 'until', label: string, value: string): string | undefined {
  if (value.trim() === '') return undefined;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw fieldError(name, `${label} is not a date and time.`);
  return date.toISOString();
}

/**
 * The audit log's filters: an action, an actor's id, a time window. `apply` fetches with them
 * (and throws the API's 400, which the form shows at the input it names).
 */
export function AuditFilters({ apply }: { apply(filter: AuditFilter): Promise<void> }) {
  const [action, setAction] = useState('');
  const [actorId, setActorId] = useState('');
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const submit = async () => {
    const filter: AuditFilter = {
      // The select offers only catalogued actions ('' is every action).
      action: auditActions.find((known) => known.value === action)?.value,
      actor_id: actorId.trim() || undefined,
      since: instant('since', 'From', since),
      until: instant('until', 'Until', until),
    };
    await apply(filter);
  };
  return (
    <div className="filters">
      <Form onSubmit={submit} submitLabel="Apply filters" busyLabel="Searching…" label="Filter the audit log">
        <div className="filter-grid">
          <Field
            name="action"
            label="Action"
            value={action}
            onChange={setAction}
            options={[{ value: '', label: 'Every action' }, ...auditActions.map(({ value, label }) => ({ value, label: `${label} (${value})` }))]}
          />
          <Field name="actor_id" label="Actor id" value={actorId} onChange={setActorId} hint="A user (usr_…) or an API key (key_…)." spellCheck={false} />
          <Field name="since" label="From" type="datetime-local" value={since} onChange={setSince} />
          <Field name="until" label="Until" type="datetime-local" value={until} onChange={setUntil} />
        </div>
      </Form>
    </div>
  );
}
