import { useState } from 'react';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { isExpired } from './key-words';

const gracePeriods = [
  { value: '86400', label: '24 hours (the default)' },
  { value: '3600', label: '1 hour' },
  { value: '604800', label: '7 days' },
  { value: '0', label: 'None: the old key stops working at once' },
];

type Rotated = { keyId: string; name: string; fullKey: string; previousExpiresAt: string | null };

/**
 * Rotation (docs/api/keys.md#rotation): a new key with the same settings and budgets, its full
 * key shown once (kept in this component's state only, gone when the page is left, as on
 * creation), while the old key keeps working for the grace period chosen.
 */
export function RotateSection({ keyRecord, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [grace, setGrace] = useState('86400');
  const [rotated, setRotated] = useState<Rotated>();
  const submit = async () => {
    setRotated(undefined);
    const { full_key, key, previous } = await client.post('/v1/keys/{key_id}/rotate', {
      params: { path: { key_id: keyRecord.key_id } },
      body: { grace_period_seconds: Number(grace) },
    });
    setRotated({ keyId: key.key_id, name: key.name, fullKey: full_key, previousExpiresAt: previous.expires_at });
    onChanged();
  };
  return (
    <Section title="Rotate the key">
      <p>
        Makes a new key with the same name, scopes, limits, budgets, alerts and routing. Both keys share one budget, and this one keeps working for the grace
        period, so programs can switch without an outage.
      </p>
      {rotated ? (
        <div className="created-key">
          <CopyOnce
            label="Your new API key"
            value={rotated.fullKey}
            warning={`Copy it now and keep it somewhere safe: it cannot be shown again. ${
              rotated.previousExpiresAt ? `The old key keeps working until ${formatDateTime(rotated.previousExpiresAt)}.` : 'The old key no longer works.'
            }`}
          />
          <div className="button-row">
            <button type="button" className="button primary" onClick={() => setRotated(undefined)}>
              I have copied it
            </button>
            <Link to={`/keys/${rotated.keyId}`}>Settings of the new key {rotated.name}</Link>
          </div>
        </div>
      ) : isExpired(keyRecord.expires_at) ? (
        <p className="muted">An expired key cannot be rotated: create a new key instead.</p>
      ) : (
        <Form onSubmit={submit} submitLabel="Rotate key" busyLabel="Rotating…" label="Rotate the key">
          <Field name="grace_period_seconds" label="The old key keeps working for" options={gracePeriods} value={grace} onChange={setGrace} required />
        </Form>
      )}
    </Section>
  );
}
