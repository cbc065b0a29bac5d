import { useEffect, useState } from 'react';
import { Loading } from '../components/loading';
import { Page } from '../components/page';
import { useRouter } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { usePages } from '../use-pages';
import { BalanceSection } from './billing/balance-section';
import { CheckoutOutcome } from './billing/checkout-outcome';
import { PlanSection } from './billing/plan-section';
import { TopUpSection } from './billing/topup-section';
import { TopupsSection } from './billing/topups-section';
import { UsageSection } from './billing/usage-section';

/** While the top-up the user came back from is pending (a payment provider confirms after the redirect), look again this often, this many times. */
const confirmationPollMs = 3_000;
const confirmationPolls = 40;

/**
 * The workspace's billing: balance, usage per day and tier, the plan and its advice, adding
 * funds and the top-ups. The payment page links back here with `?workspace_id=&checkout_id=`:
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
  const { client } = useSignedIn();
  const balance = useLoad(() => client.get('/v1/billing/balance'), [client]);
  const topups = usePages((after) => client.get('/v1/billing/topups', { params: { query: { limit: 20, after } } }), [client]);
  const [polls, setPolls] = useState(0);
  const returned = checkoutId && topups.status === 'done' ? topups.data.find((checkout) => checkout.checkout_id === checkoutId) : undefined;
  const awaiting = returned?.status === 'pending' && polls < confirmationPolls;
  const { reload: reloadBalance } = balance;
  const { reload: reloadTopups } = topups;

  useEffect(() => {
    if (!awaiting) return;
    const timer = setTimeout(() => {
      setPolls((n) => n + 1);
      reloadBalance();
      reloadTopups();
    }, confirmationPollMs);
    return () => clearTimeout(timer);
  }, [awaiting, reloadBalance, reloadTopups]);

  return (
    <Page title="Billing">
      {returned && <CheckoutOutcome checkout={returned} />}
      <BalanceSection balance={balance} />
      <TopUpSection />
      <UsageSection />
      <PlanSection />
      <TopupsSection topups={topups} />
    </Page>
  );
}
