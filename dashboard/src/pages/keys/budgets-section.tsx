import { useState } from 'react';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { BudgetsTable, type SpendLimit, SpendLimitsForm } from './spend-limits';

/**
 * The key's periodic budgets (docs/api/keys.md#periodic-budgets): day, week, month and total,
 * each with its spend, what is left and when it resets. The month's is the key's monthly spend
 * cap, so this section is where the cap is set too.
 */
export function BudgetsSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [saved, setSaved] = useState(false);
  const save = async (spendLimits: SpendLimit[]) => {
    setSaved(false);
    await client.put('/v1/keys/{key_id}/spend-limits', { params: { path: { key_id: keyRecord.key_id } }, body: { spend_limits: spendLimits } });
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Budgets">
      {keyRecord.spend_limits.length === 0 ? (
        <p>No budgets: the key is never refused for its own spend (the workspace's budgets and balance still apply).</p>
      ) : (
        <>
          <p>Once a period's spend reaches its limit, the key is refused (402 spend_cap_exceeded) until the period ends or the limit is raised.</p>
          <BudgetsTable limits={keyRecord.spend_limits} caption="Budgets of the key" />
        </>
      )}
      {keyRecord.rotated_from && <p className="hint">This key shares its budgets' spend with the key it was rotated from.</p>}
      {canManage && <SpendLimitsForm limits={keyRecord.spend_limits} label="The key's budgets" onSave={save} />}
      {saved && <Notice>The budgets are saved.</Notice>}
    </Section>
  );
}
