import { useCallback, useEffect, useState } from 'react';
import { Loading } from '../components/loading';
import { Page } from '../components/page';
import { compareDecimals } from '../decimal';
import { can } from '../permissions';
import { useRouter } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { usePages } from '../use-pages';
import { AutoTopupSection } from './billing/auto-topup-section';
import { BalanceSection } from './billing/balance-section';
import { CheckoutOutcome } from './billing/checkout-outcome';
import { LedgerSection, ledgerPageSize } from './billing/ledger-section';
import { PaymentMethodsSection } from './billing/payment-methods-section';
import { PlanSection } from './billing/plan-section';
import { StatementSection } from './billing/statement-section';
import { TopUpSection } from './billing/topup-section';
import { TopupsSection } from './billing/topups-section';
import { UsageSection } from './billing/usage-section';
import { WorkspaceBudgetsSection } from './billing/workspace-budgets-section';

/** While the top-up the user came back from is pending (a payment provider confirms after the redirect), look again this often, this many times. */
const confirmationPollMs = 3_000;
const confirmationPolls = 40;
/** While auto top-up is on and the balance is below its threshold (a charge is under way), look again this often, this many times. */
const autoTopupPollMs = 3_000;
const autoTopupPolls = 40;

/** Whether `balance` (a decimal string, maybe negative) is below `threshold` (positive). */
function isBelow(balance: string, threshold: string): boolean {
  return balance.trim().startsWith('-') || compareDecimals(balance, threshold) < 0;
}

/**
 * The workspace's billing: balance, adding funds, saved cards and auto top-up, budgets, usage per
 * day and tier, the plan and its advice, the month's statement, the ledger and the top-ups. The payment page links back here with `?workspace_id=&checkout_id=`:
 * the page opens that workspace and says how the top-up went.
 */
export function BillingPage() {
  const { workspace, workspaces, selectWorkspace } = useSignedIn();
  const { location, navigate } = useRouter();
  const wantedWorkspace = location.query.get('workspace_id');
  const switching = wantedWorkspace !== null && wantedWorkspace !== workspace.org_id && workspaces.some((candidate) => candidate.org_id === wantedWorkspace);

  useEffect(() => {
    if (wantedWorkspace === null) return;
    if (switching) selectWorkspace(wantedWorkspace);
    // Once applied, the parameter goes: picking another workspace later must not bring this one back.
    const rest = new URLSearchParams(location.query);
    rest.delete('workspace_id');
    navigate(`/billing${rest.size ? `?${rest}` : ''}`, { replace: true });
  }, [wantedWorkspace, switching, selectWorkspace, location.query, navigate]);

  if (switching) return <Loading what="Opening the workspace of the top-up" />;
  return <Billing checkoutId={location.query.get('checkout_id')} />;
}

function Billing({ checkoutId }: { checkoutId: string | null }) {
  const { client, role } = useSignedIn();
  // The auto top-up settings are the managers' (billing.manage): other roles do not ask for them.
  const mayManage = can(role, 'billing.manage');
  const balance = useLoad(() => client.get('/v1/billing/balance'), [client]);
  const topups = usePages((after) => client.get('/v1/billing/topups', { params: { query: { limit: 20, after } } }), [client]);
  // The first page of 100, the most a page holds: a workspace saves a handful of cards, not a hundred.
  const methods = useLoad(() => client.get('/v1/billing/payment-methods', { params: { query: { limit: 100 } } }), [client]);
  const autoTopup = useLoad(() => (mayManage ? client.get('/v1/billing/auto-topup') : Promise.resolve(null)), [client, mayManage]);
  const ledger = usePages((after) => client.get('/v1/billing/ledger', { params: { query: { limit: ledgerPageSize, after } } }), [client]);
  const [statementRefresh, setStatementRefresh] = useState(0);
  const [polls, setPolls] = useState(0);
  const [chargePolls, setChargePolls] = useState(0);
  const returned = checkoutId && topups.status === 'done' ? topups.data.find((checkout) => checkout.checkout_id === checkoutId) : undefined;
  const awaiting = returned?.status === 'pending' && polls < confirmationPolls;
  const settings = autoTopup.status === 'done' ? (autoTopup.data ?? undefined) : undefined;
  const charging =
    settings?.enabled === true &&
    settings.threshold_usd !== null &&
    balance.status === 'done' &&
    isBelow(balance.data.balance_usd, settings.threshold_usd) &&
    chargePolls < autoTopupPolls;
  const { reload: reloadBalance } = balance;
  const { reload: reloadTopups } = topups;
  const { reload: reloadMethods } = methods;
  const { reload: reloadAutoTopup } = autoTopup;
  const { reload: reloadLedger } = ledger;

  /** After a change of the balance: everything that shows it. */
  const reloadMoney = useCallback(() => {
    reloadBalance();
    reloadAutoTopup();
    reloadLedger();
    setStatementRefresh((n) => n + 1);
  }, [reloadBalance, reloadAutoTopup, reloadLedger]);

  useEffect(() => {
    if (!awaiting) return;
    const timer = setTimeout(() => {
      setPolls((n) => n + 1);
      reloadMoney();
      reloadTopups();
    }, confirmationPollMs);
    return () => clearTimeout(timer);
  }, [awaiting, reloadMoney, reloadTopups]);

  // Auto top-up charges in the background once the balance is below its threshold: the page looks again until it is credited.
  useEffect(() => {
    if (!charging) return;
    const timer = setTimeout(() => {
      setChargePolls((n) => n + 1);
      reloadMoney();
    }, autoTopupPollMs);
    return () => clearTimeout(timer);
  }, [charging, reloadMoney]);

  return (
    <Page title="Billing">
      {returned && <CheckoutOutcome checkout={returned} />}
      <BalanceSection balance={balance} />
      <TopUpSection />
      <PaymentMethodsSection
        methods={methods}
        onChange={() => {
          reloadMethods();
          // Removing the last card switches auto top-up off.
          reloadAutoTopup();
        }}
      />
      <AutoTopupSection
        settings={autoTopup}
        onSaved={() => {
          setChargePolls(0);
          reloadMoney();
        }}
      />
      <WorkspaceBudgetsSection />
      <UsageSection />
      <PlanSection />
      <StatementSection refreshKey={statementRefresh} />
      <LedgerSection ledger={ledger} />
      <TopupsSection topups={topups} />
    </Page>
  );
}
