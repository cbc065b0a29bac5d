import { type Schemas, SwitchboardError } from '@switchboard/sdk';
import { useState } from 'react';
import { Checkbox } from '../../components/checkbox';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Loaded } from '../../components/loaded';
import { Money } from '../../components/money';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { LoadState } from '../../use-load';
import { AddCard } from './add-card';
import { disabledReasonText } from './ledger-words';

export type AutoTopup = Schemas['switchboard.billing.v1.AutoTopup'];

/**
 * Auto top-up: when a debit takes the balance below the threshold, the default card is charged
 * the amount, at most the monthly limit per calendar month (UTC); three failed charges in a row
 * switch it off. Owners and admins set it and see how it stands (billing.manage); other roles see neither.
 */
export function AutoTopupSection({ settings, onSaved }: { settings: LoadState<AutoTopup | null>; onSaved(): void }) {
  const { role, workspace } = useSignedIn();
  const mayManage = can(role, 'billing.manage');
  // Here, not in the form: a save starts the form again from what is saved.
  const [saved, setSaved] = useState(false);
  if (!mayManage) {
    return (
      <Section title="Auto top-up">
        <p className="muted">
          Your role in {workspace.name} ({role}) does not allow auto top-up. The owner or an admin of the workspace sets it and sees how it stands.
        </p>
      </Section>
    );
  }
  return (
    <Section title="Auto top-up">
      <Loaded state={settings} what="Loading the auto top-up settings">
        {(current) =>
          current && (
            <>
              <AutoTopupState settings={current} />
              {/* Keyed by the saved version: a save or a change elsewhere (a card removed) starts the form again from what is saved. */}
              <AutoTopupForm
                key={current.updated_at ?? 'never'}
                settings={current}
                onSaving={() => setSaved(false)}
                onSaved={() => {
                  setSaved(true);
                  onSaved();
                }}
              />
            </>
          )
        }
      </Loaded>
      {saved && <Notice>Auto top-up saved.</Notice>}
    </Section>
  );
}

/** How auto top-up stands: on or off (and why the service switched it off), this month's charges, failures in a row. */
function AutoTopupState({ settings }: { settings: AutoTopup }) {
  const { enabled, threshold_usd, amount_usd, monthly_limit_usd, low_balance_threshold_usd, charged_this_month_usd, consecutive_failures, disabled_reason } =
    settings;
  return (
    <>
      {disabled_reason && !enabled && (
        <p className="warning" data-testid="auto-topup-disabled-reason">
          {disabledReasonText(disabled_reason)}
        </p>
      )}
      <dl className="facts" data-testid="auto-topup-state">
        <dt>Status</dt>
        <dd>{enabled ? <span className="badge ok">On</span> : <span className="badge muted">Off</span>}</dd>
        <dt>Charge when the balance falls below</dt>
        <dd>{threshold_usd ? <Money amount={threshold_usd} /> : '—'}</dd>
        <dt>Amount of each charge</dt>
        <dd>{amount_usd ? <Money amount={amount_usd} /> : '—'}</dd>
        <dt>Monthly limit</dt>
        <dd>{monthly_limit_usd ? <Money amount={monthly_limit_usd} /> : '—'}</dd>
        <dt>Charged this month (UTC)</dt>
        <dd data-testid="auto-topup-charged">
          <Money amount={charged_this_month_usd} />
        </dd>
        <dt>Failed charges in a row</dt>
        <dd>{consecutive_failures === 0 ? 'None' : `${consecutive_failures} of 3 (at 3, auto top-up switches off)`}</dd>
        <dt>Low-balance notice</dt>
        <dd>
          {low_balance_threshold_usd ? (
            <>
              <code>billing.balance.low</code> when the balance falls below <Money amount={low_balance_threshold_usd} />
            </>
          ) : (
            'Off'
          )}
        </dd>
        <dt>Last changed</dt>
        <dd>{formatDateTime(settings.updated_at)}</dd>
      </dl>
    </>
  );
}

const amountHint = 'Above 0, at most 2 decimals, e.g. 20.00.';

function AutoTopupForm({ settings, onSaving, onSaved }: { settings: AutoTopup; onSaving(): void; onSaved(): void }) {
  const { client } = useSignedIn();
  const [enabled, setEnabled] = useState(settings.enabled);
  const [threshold, setThreshold] = useState(settings.threshold_usd ?? '');
  const [amount, setAmount] = useState(settings.amount_usd ?? '');
  const [monthlyLimit, setMonthlyLimit] = useState(settings.monthly_limit_usd ?? '');
  const [lowBalance, setLowBalance] = useState(settings.low_balance_threshold_usd ?? '');
  const [needsCard, setNeedsCard] = useState(false);

  const submit = async () => {
    onSaving();
    setNeedsCard(false);
    // A field left empty is left out (it keeps its saved value), but for the notice, whose empty field switches it off (null).
    const optional = (value: string) => value.trim() || undefined;
    const low = lowBalance.trim();
    const body = {
      enabled,
      threshold_usd: optional(threshold),
      amount_usd: optional(amount),
      monthly_limit_usd: optional(monthlyLimit),
      // The OpenAPI document types the value as a number or a string; null is how the API clears it.
      low_balance_threshold_usd: (low || null) as string,
    };
    try {
      await client.put('/v1/billing/auto-topup', { body });
    } catch (error) {
      if (error instanceof SwitchboardError && error.code === 'payment_method_required') {
        setNeedsCard(true);
        // Shown at the switch that needs the card, whatever field the API names.
        throw new SwitchboardError({ status: error.status, code: error.code, message: error.message, field: 'enabled', requestId: error.requestId });
      }
      throw error;
    }
    onSaved();
  };

  return (
    <>
      <Form onSubmit={submit} submitLabel="Save auto top-up" busyLabel="Saving…" label="Auto top-up settings">
        <Checkbox name="enabled" label="Charge the default card automatically when the balance runs low" checked={enabled} onChange={setEnabled} />
        <Field
          name="threshold_usd"
          label="Threshold in USD"
          hint={`A charge starts when the balance falls below it. ${amountHint}`}
          inputMode="decimal"
          value={threshold}
          onChange={setThreshold}
          required={enabled}
        />
        <Field
          name="amount_usd"
          label="Amount in USD"
          hint={`What each charge adds to the balance. ${amountHint}`}
          inputMode="decimal"
          value={amount}
          onChange={setAmount}
          required={enabled}
        />
        <Field
          name="monthly_limit_usd"
          label="Monthly limit in USD"
          hint="The most charged automatically per calendar month (UTC); at least the amount."
          inputMode="decimal"
          value={monthlyLimit}
          onChange={setMonthlyLimit}
          required={enabled}
        />
        <Field
          name="low_balance_threshold_usd"
          label="Low-balance notice below, in USD"
          hint="Sends the billing.balance.low webhook event each time the balance falls below it, whether auto top-up is on or not. Empty: no notice."
          inputMode="decimal"
          value={lowBalance}
          onChange={setLowBalance}
        />
      </Form>
      {needsCard && (
        <div className="needs-card" data-testid="auto-topup-needs-card">
          <p>Auto top-up charges a saved card: save one first (nothing is charged then), then switch auto top-up on.</p>
          <AddCard label="Add a card for auto top-up" />
        </div>
      )}
    </>
  );
}
