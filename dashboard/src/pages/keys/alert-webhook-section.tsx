import { useState } from 'react';
import { ConfirmAction } from '../../components/confirm-action';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { compareDecimals } from '../../decimal';
import { indexInList, retargetFieldError } from '../../error-fields';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { percentsLabel } from './key-words';

/**
 * The HTTPS endpoint that receives the key's spend alerts (`key.spend_alert`): one at each
 * threshold, a percent of each budget, once per budget period. Each save issues a new signing
 * secret, shown here once.
 */
export function AlertWebhookSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [url, setUrl] = useState(keyRecord.alert_webhook_url ?? '');
  const [thresholds, setThresholds] = useState(keyRecord.alert_thresholds_pct.join(', '));
  const [secret, setSecret] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const path = { key_id: keyRecord.key_id };
  const budgeted = keyRecord.spend_limits.some((limit) => compareDecimals(limit.amount_usd, '0') > 0);
  const save = async () => {
    setNotice(undefined);
    setSecret(undefined);
    const typed = thresholds
      .split(',')
      .map((pct) => pct.trim())
      .filter(Boolean);
    if (!typed.every((pct) => /^\d+$/.test(pct)))
      throw fieldError('thresholds_pct', 'The thresholds must be whole percents from 1 to 100, separated by commas.');
    // None typed: left out, so the API's default (80 and 100) applies.
    const body = { url: url.trim(), ...(typed.length ? { thresholds_pct: typed.map(Number) } : {}) };
    const key = await client.put('/v1/keys/{key_id}/alert-webhook', { params: { path }, body }).catch((error: unknown) => {
      // `thresholds_pct[i]` is the i-th percent typed: the message says which, the input holds them all.
      throw retargetFieldError(error, (field) => {
        const index = indexInList(field, 'thresholds_pct');
        return index === undefined ? undefined : { field: 'thresholds_pct', mention: `Threshold ${index + 1} of thresholds_pct` };
      });
    });
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
            Alerts go to <code>{keyRecord.alert_webhook_url}</code> when the spend of a budget period reaches{' '}
            <span data-testid="alert-thresholds">{percentsLabel(keyRecord.alert_thresholds_pct)}</span> of its limit (once each per period), signed as Standard
            Webhooks.
          </>
        ) : (
          'No alert webhook: no spend alerts are sent for this key.'
        )}
      </p>
      {!budgeted && <p className="hint">Alerts are sent only for budgets above zero: set one under Budgets.</p>}
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
            <Field
              name="thresholds_pct"
              label="Alert thresholds (% of each budget)"
              hint="1 to 10 different whole percents from 1 to 100, separated by commas, e.g. 50, 80, 100. Empty: 80, 100."
              inputMode="numeric"
              value={thresholds}
              onChange={setThresholds}
            />
          </Form>
          {keyRecord.alert_webhook_url && (
            <div className="secondary-action">
              <ConfirmAction
                label="Remove the webhook"
                question="Stop sending spend alerts for this key? Its signing secret is deleted; the budgets stay."
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
