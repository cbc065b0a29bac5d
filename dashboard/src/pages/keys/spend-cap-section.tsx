import { useState } from 'react';
import { ConfirmAction } from '../../components/confirm-action';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Money } from '../../components/money';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

/** The monthly spend cap in USD: set (kept exactly as typed) or cleared. */
export function SpendCapSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [cap, setCap] = useState(keyRecord.monthly_spend_cap_usd ?? '');
  const [notice, setNotice] = useState<string>();
  const path = { key_id: keyRecord.key_id };
  const current = keyRecord.monthly_spend_cap_usd;
  const set = async () => {
    setNotice(undefined);
    const key = await client.patch('/v1/keys/{key_id}/spend-cap', { params: { path }, body: { monthly_spend_cap_usd: cap.trim() } });
    setNotice(`The monthly cap is now $${key.monthly_spend_cap_usd}.`);
    onChanged();
  };
  const clear = async () => {
    setNotice(undefined);
    await client.patch('/v1/keys/{key_id}/spend-cap', { params: { path }, body: { clear: true } });
    setCap('');
    setNotice('The key has no cap any more.');
    onChanged();
  };
  return (
    <Section title="Monthly spend cap">
      <p>
        {current === null ? (
          'No cap: the key is never refused for its spend (the workspace balance still applies).'
        ) : (
          <>
            Capped at <Money amount={current} /> a month (UTC). Once the spend this month reaches it, the key is refused until the month ends or the cap is
            raised.
          </>
        )}
      </p>
      {canManage && (
        <>
          <Form onSubmit={set} submitLabel="Set cap" busyLabel="Saving…" label="Set the monthly spend cap">
            <Field
              name="monthly_spend_cap_usd"
              label="Cap in USD"
              hint="A plain decimal such as 50.00; 0 blocks the key at once. Applies immediately."
              inputMode="decimal"
              value={cap}
              onChange={setCap}
              required
            />
          </Form>
          {current !== null && (
            <div className="secondary-action">
              <ConfirmAction
                label="Remove the cap"
                question="Remove the monthly cap? The key is then never refused for its spend."
                confirmLabel="Yes, remove it"
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
