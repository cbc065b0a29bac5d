import { useState } from 'react';
import { ConfirmAction } from '../../components/confirm-action';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { compareDecimals } from '../../decimal';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

/**
 * The HTTPS endpoint that receives the key's spend alerts (`key.spend_alert`): one at the
 * threshold, one at the cap. Each save issues a new signing secret, shown here once.
 */
export function AlertWebhookSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [url, setUrl] = useState(keyRecord.alert_webhook_url ?? '');
  const [threshold, setThreshold] = useState(String(keyRecord.alert_threshold_pct ?? 80));
  const [secret, setSecret] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const path = { key_id: keyRecord.key_id };
  const cap = keyRecord.monthly_spend_cap_usd;
  const save = async () => {
    setNotice(undefined);
    setSecret(undefined);
    const pct = threshold.trim();
    if (!/^\d+$/.test(pct)) throw fieldError('threshold_pct', 'The threshold must be a whole number from 1 to 100.');
    const key = await client.put('/v1/keys/{key_id}/alert-webhook', { params: { path }, body: { url: url.trim(), threshold_pct: Number(pct) } });
    setSecret(key.signing_secret ?? undefined);
    onChanged();
  };
  const remove = async () => {
    setSecret(undefined);
    await client.delete('/v1/keys/{key_id}/alert-webhook', { params: { path } });
    setUrl('');
    setNotice('Spend alerts are off for this key.');
    onChanged();
  };
  return (
    <Section title="Spend alerts">
      <p>
        {keyRecord.alert_webhook_url ? (
          <>
            Alerts go to <code>{keyRecord.alert_webhook_url}</code> when this month's spend reaches {keyRecord.alert_threshold_pct}% of the cap, and again at
            the cap (once each per month), signed as Standard Webhooks.
          </>
        ) : (
          'No alert webhook: no spend alerts are sent for this key.'
        )}
      </p>
      {(cap === null || compareDecimals(cap, '0') === 0) && <p className="hint">Alerts are sent only while the key has a cap above zero.</p>}
      {secret && (
        <CopyOnce
          label="Signing secret of the alert webhook"
          value={secret}
          warning="Copy it into your receiver now: it verifies the alerts' signatures and cannot be shown again. The previous secret no longer signs."
        />
      )}
      {canManage && (
        <>
          <Form
            onSubmit={save}
            submitLabel={keyRecord.alert_webhook_url ? 'Save and issue a new secret' : 'Turn on alerts'}
            busyLabel="Saving…"
            label="Alert webhook"
          >
            <Field
              name="url"
              label="Endpoint URL"
              type="url"
              inputMode="url"
              hint="An https:// address that receives the alerts."
              value={url}
              onChange={setUrl}
              required
            />
            <Field name="threshold_pct" label="First alert at (% of the cap)" hint="1 to 100." inputMode="numeric" value={threshold} onChange={setThreshold} />
          </Form>
          {keyRecord.alert_webhook_url && (
            <div className="secondary-action">
              <ConfirmAction
                label="Remove the webhook"
                question="Stop sending spend alerts for this key? Its signing secret is deleted; the cap stays."
                confirmLabel="Yes, remove it"
                onConfirm={remove}
              />
            </div>
          )}
        </>
      )}
      {notice && <Notice>{notice}</Notice>}
    </Section>
  );
}
