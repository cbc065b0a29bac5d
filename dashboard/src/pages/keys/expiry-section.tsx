import { useEffect, useState } from 'react';
import { ConfirmAction } from '../../components/confirm-action';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { formatDateTime, localInputValue } from '../../format';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { isExpired } from './key-words';

/** When the key stops working (401 api_key_expired), or never; a time in the future, or cleared. */
export function ExpirySection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const current = keyRecord.expires_at;
  const [expiresAt, setExpiresAt] = useState('');
  const [notice, setNotice] = useState<string>();
  const path = { key_id: keyRecord.key_id };
  // The input follows the saved expiry, also when it changes from elsewhere (a rotation ends this key's grace period).
  useEffect(() => setExpiresAt(current ? localInputValue(new Date(current)) : ''), [current]);
  const patch = async (value: string | null) => {
    setNotice(undefined);
    const key = await client.patch('/v1/keys/{key_id}', { params: { path }, body: { expires_at: value } });
    setNotice(key.expires_at ? `The key now expires on ${formatDateTime(key.expires_at)}.` : 'The key no longer expires.');
    onChanged();
  };
  // A datetime-local value has no offset: Date reads it as the reader's local time. Empty means never.
  const save = () => patch(expiresAt ? new Date(expiresAt).toISOString() : null);
  const clear = () => patch(null);
  return (
    <Section title="Expiry">
      <p data-testid="key-expiry">
        {current === null
          ? 'The key never expires.'
          : isExpired(current)
            ? `The key expired on ${formatDateTime(current)}: it is refused everywhere (401 api_key_expired).`
            : `The key expires on ${formatDateTime(current)}; from then on it is refused everywhere (401 api_key_expired).`}
      </p>
      {canManage && (
        <>
          <Form onSubmit={save} submitLabel="Save expiry" busyLabel="Saving…" label="Expiry of the key">
            <Field
              name="expires_at"
              label="Expires at"
              type="datetime-local"
              hint="Your local time, in the future (at most 10 years ahead). Empty: never."
              value={expiresAt}
              onChange={setExpiresAt}
            />
          </Form>
          {current !== null && (
            <div className="secondary-action">
              <ConfirmAction
                label="Never expire"
                question="Remove the expiry? The key then works until it is revoked."
                confirmLabel="Yes, never expire"
                danger={false}
                onConfirm={clear}
              />
            </div>
          )}
        </>
      )}
      {notice && <Notice>{notice}</Notice>}
    </Section>
  );
}
