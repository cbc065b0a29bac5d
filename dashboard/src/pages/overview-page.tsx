import { Page } from '../components/page';
import { can } from '../permissions';
import { useSignedIn } from '../session';
import { FailingDeliveriesSection } from './overview/failing-deliveries-section';
import { FiguresSection } from './overview/figures-section';
import { KeysNearCapSection } from './overview/keys-near-cap-section';

/**
 * The landing page after sign-in: the workspace at a glance (balance, this month's spend, today's
 * requests, keys near their caps, failing webhook deliveries), each part as far as the role reads it.
 */
export function OverviewPage() {
  const { role, workspace } = useSignedIn();
  const billing = can(role, 'billing.read');
  const keys = can(role, 'keys.read');
  const webhooks = can(role, 'webhooks.read');
  return (
    <Page title="Overview">
      <p>{workspace.name} at a glance.</p>
      {billing && <FiguresSection />}
      {keys && <KeysNearCapSection />}
      {webhooks && <FailingDeliveriesSection />}
      {!billing && !keys && !webhooks && (
        <p>
          Your role in {workspace.name} ({role}) reads none of its billing, keys or webhooks.
        </p>
      )}
    </Page>
  );
}
