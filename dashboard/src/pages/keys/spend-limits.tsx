import type { Schemas } from '@switchboard/sdk';
import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Money } from '../../components/money';
import { compareDecimals } from '../../decimal';
import { indexInList, retargetFieldError } from '../../error-fields';
import { formatDateTime } from '../../format';

export type SpendLimitStatus = Schemas['switchboard.keys.v1.SpendLimitStatus'];
export type SpendLimit = Schemas['switchboard.keys.v1.SpendLimit'];

/** The budget periods of the API (UTC; weeks start Monday), in the order the pages show them. */
export const budgetPeriods = [
  { period: 'day', label: 'Daily budget in USD', name: 'Day', hint: 'Resets every day at 00:00 UTC.' },
  { period: 'week', label: 'Weekly budget in USD', name: 'Week', hint: 'Resets every Monday at 00:00 UTC.' },
  { period: 'month', label: 'Monthly budget in USD', name: 'Month', hint: 'Resets on the 1st of each month at 00:00 UTC.' },
  { period: 'total', label: 'Total budget in USD', name: 'Total', hint: 'Never resets: all the spend since the limit was set counts.' },
] as const;

/** The input of a period's amount: the API names it by its place in the list sent, which depends on what is filled in. */
function amountInput(period: string): string {
  return `spend_limits.${period}.amount_usd`;
}

function periodName(period: string): string {
  return budgetPeriods.find((candidate) => candidate.period === period)?.name ?? period;
}

/** Budgets and where each stands in its current period: limit, spend, what is left, when it starts again from zero. */
export function BudgetsTable({ limits, caption }: { limits: SpendLimitStatus[]; caption: string }) {
  const ordered = budgetPeriods.flatMap(({ period }) => limits.filter((limit) => limit.period === period));
  return (
    <table className="data-table budgets">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Period</th>
          <th scope="col">Limit</th>
          <th scope="col">Spent</th>
          <th scope="col">Remaining</th>
          <th scope="col">Resets</th>
        </tr>
      </thead>
      <tbody>
        {ordered.map((limit) => {
          const reached = compareDecimals(limit.spend_usd, limit.amount_usd) >= 0;
          return (
            <tr key={limit.period} data-period={limit.period}>
              <th scope="row">{periodName(limit.period)}</th>
              <td className="number">
                <Money amount={limit.amount_usd} />
              </td>
              <td className="number">
                <Money amount={limit.spend_usd} />
              </td>
              <td className="number">
                <Money amount={limit.remaining_usd} />
                {reached && <strong className="reached"> · reached, refused until it resets</strong>}
              </td>
              <td>{limit.resets_at ? formatDateTime(limit.resets_at) : <span className="muted">Never</span>}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/**
 * The four budgets as inputs (empty: no limit for that period), sent as the whole list the API
 * replaces (`PUT …/spend-limits`). Amounts go as typed (the API keeps them exactly and checks
 * them), and an error about `spend_limits[i]` is shown at the input of that entry's period.
 */
export function SpendLimitsForm({ limits, label, onSave }: { limits: SpendLimitStatus[]; label: string; onSave(limits: SpendLimit[]): Promise<void> }) {
  const [amounts, setAmounts] = useState<Record<string, string>>(() =>
    Object.fromEntries(budgetPeriods.map(({ period }) => [period, limits.find((limit) => limit.period === period)?.amount_usd ?? ''])),
  );
  const submit = async () => {
    const sent = budgetPeriods.flatMap(({ period }) => (amounts[period].trim() ? [{ period, amount_usd: amounts[period].trim() }] : []));
    try {
      await onSave(sent);
    } catch (error) {
      throw retargetFieldError(error, (field) => {
        const index = indexInList(field, 'spend_limits');
        return index !== undefined && sent[index] ? { field: amountInput(sent[index].period) } : undefined;
      });
    }
  };
  return (
    <Form onSubmit={submit} submitLabel="Save budgets" busyLabel="Saving…" label={label}>
      {budgetPeriods.map(({ period, label: fieldLabel, hint }) => (
        <Field
          key={period}
          name={amountInput(period)}
          label={fieldLabel}
          hint={`${hint} Empty: no limit.`}
          inputMode="decimal"
          value={amounts[period]}
          onChange={(value) => setAmounts((current) => ({ ...current, [period]: value }))}
        />
      ))}
    </Form>
  );
}
