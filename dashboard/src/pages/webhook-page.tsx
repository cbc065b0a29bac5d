import { useState } from 'react';
import type { DeliveryStatus } from '../closed-sets';
import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { formatDateTime } from '../format';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { usePages } from '../use-pages';
import { DeleteSection } from './webhooks/delete-section';
import { DeliveriesSection } from './webhooks/deliveries-section';
import { describeEvents } from './webhooks/event-types';
import { RecoverSection } from './webhooks/recover-section';
import { SecretSection } from './webhooks/secret-section';
import { SettingsSection } from './webhooks/settings-section';
import { type Webhook, WebhookStatus } from './webhooks/webhook-status';

/** One endpoint: its settings, delivery log (test, redeliver, recover), signing secret and deletion. */
export function WebhookPage({ params }: { params: Record<string, string> }) {
  const { client, workspace } = useSignedIn();
  const path = { workspace_id: workspace.org_id, webhook_id: params.webhookId };
  const loaded = useLoad(
    () => client.get('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}', { params: { path } }),
    [client, workspace.org_id, params.webhookId],
  );
  return (
    <Page title="Webhook endpoint">
      <p>
        <Link to="/webhooks">All endpoints</Link>
      </p>
      <Loaded state={loaded} what="Loading the endpoint">
        {(webhook) => <Endpoint initial={webhook} />}
      </Loaded>
    </Page>
  );
}

function Endpoint({ initial }: { initial: Webhook }) {
  const { client, workspace, role } = useSignedIn();
  const [webhook, setWebhook] = useState(initial);
  const [status, setStatus] = useState('');
  const deliveries = usePages(
    (after) =>
      client.get('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries', {
        params: {
          path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id },
          query: { limit: 20, after, ...(status ? { status: status as DeliveryStatus } : {}) },
        },
      }),
    [client, workspace.org_id, webhook.webhook_id, status],
  );
  const manage = can(role, 'webhooks.manage');
  return (
    <>
      <Section title={webhook.url}>
        <dl className="facts">
          <dt>Status</dt>
          <dd>
            <WebhookStatus webhook={webhook} />
          </dd>
          <dt>Events</dt>
          <dd>{describeEvents(webhook.events)}</dd>
          <dt>Description</dt>
          <dd>{webhook.description ?? '—'}</dd>
          <dt>Endpoint id</dt>
          <dd>
            <code>{webhook.webhook_id}</code>
          </dd>
          <dt>Created</dt>
          <dd>{formatDateTime(webhook.created_at)}</dd>
          <dt>Changed</dt>
          <dd>{formatDateTime(webhook.updated_at)}</dd>
          {webhook.disabled_at && (
            <>
              <dt>Disabled</dt>
              <dd>{formatDateTime(webhook.disabled_at)}</dd>
            </>
          )}
        </dl>
      </Section>
      <DeliveriesSection webhook={webhook} deliveries={deliveries} status={status} onStatus={setStatus} />
      {manage && <RecoverSection webhook={webhook} onRecovered={deliveries.reload} />}
      {manage && <SettingsSection webhook={webhook} onSaved={setWebhook} />}
      {manage && <SecretSection webhook={webhook} />}
      {manage && <DeleteSection webhook={webhook} />}
    </>
  );
}
