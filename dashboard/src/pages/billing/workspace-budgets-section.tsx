import { useState } from 'react';
import { Loaded } from '../../components/loaded';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { BudgetsTable, type SpendLimit, SpendLimitsForm } from '../keys/spend-limits';

/**
 * The workspace's periodic budgets (docs/api/keys.md#workspace-budgets): the same limits as a
 * key's, over the spend of every key. Every role that sees billing sees how they stand; owners
 * and admins (billing.manage) change them.
 */
export function WorkspaceBudgetsSection() {
  const { client, role, workspace } = useSignedIn();
  const mayManage = can(role, 'billing.manage');
  const budgets = useLoad(() => client.get('/v1/billing/spend-limits'), [client]);
  const [saved, setSaved] = useState(false);
  const save = async (spendLimits: SpendLimit[]) => {
    setSaved(false);
    await client.put('/v1/billing/spend-limits', { body: { spend_limits: spendLimits } });
    setSaved(true);
    budgets.reload();
  };
  return (
    <Section title="Workspace budgets">
      <Loaded state={budgets} what="Loading the workspace budgets">
        {({ spend_limits }) => (
          <>
            {spend_limits.length === 0 ? (
              <p>No workspace budgets: the keys' own budgets and the balance are the only limits.</p>
            ) : (
              <>
                <p>
                  Once the spend of all the workspace's keys in a period reaches its limit, every model request is refused (402 spend_cap_exceeded) until the
                  period ends or the limit is raised.
                </p>
                <BudgetsTable limits={spend_limits} caption="Budgets of the workspace" />
              </>
            )}
            {mayManage ? (
              <SpendLimitsForm limits={spend_limits} label="The workspace's budgets" onSave={save} />
            ) : (
              <p className="muted">
                Your role in {workspace.name} ({role}) does not allow changing the budgets. The owner or an admin of the workspace sets them.
              </p>
            )}
          </>
        )}
      </Loaded>
      {saved && <Notice>The workspace budgets are saved.</Notice>}
    </Section>
  );
}
