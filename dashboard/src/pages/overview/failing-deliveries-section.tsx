import type { Schemas } from '@switchboard/sdk';
import { Empty } from '../../components/empty';
import { Loaded } from '../../components/loaded';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { useLoad } from '../../use-load';
import { type Delivery, DeliveryStatus } from '../webhooks/delivery-status';

type Webhook = Schemas['switchboard.webhooks.v1.Webhook'];

/** How many failing deliveries the overview lists; the endpoint's page has its whole log. */
const shown = 10;

/**
 * The most recent deliveries that failed (retrying) or gave up (exhausted), over the workspace's
 * endpoints, newest first, each linked to its endpoint's log.
 */
export function FailingDeliveriesSection() {
  const { client, workspace } = useSignedIn();
  const state = useLoad(async () => {
    const workspace_id = workspace.org_id;
    const { data: webhooks } = await client.get('/v1/workspaces/{workspace_id}/webhooks', { params: { path: { workspace_id }, query: { limit: 100 } } });
    const lists = await Promise.all(
      webhooks.flatMap((webhook) =>
        (['failed', 'exhausted'] as const).map(async (status) => {
          const { data } = await client.get('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries', {
            params: { path: { workspace_id, webhook_id: webhook.webhook_id }, query: { limit: shown, status } },
          });
          return data.map((delivery) => ({ delivery, webhook }));
        }),
      ),
    );
    const failing = lists.flat().sort((a, b) => b.delivery.created_at.localeCompare(a.delivery.created_at));
    return { webhooks: webhooks.length, failing: failing.slice(0, shown) };
  }, [client, workspace.org_id]);
  return (
    <Section title="Failing webhook deliveries">
      <Loaded state={state} what="Loading the webhook deliveries">
        {({ webhooks, failing }) =>
          failing.length === 0 ? (
            <Empty title="No failing delivery">
              <p>{webhooks === 0 ? 'The workspace has no webhook endpoint.' : 'Every recent delivery to the endpoints succeeded or is still on its way.'}</p>
            </Empty>
          ) : (
            <table className="data-table">
              <thead>
                <tr>
                  <th scope="col">Event</th>
                  <th scope="col">Endpoint</th>
                  <th scope="col">Status</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Created</th>
                </tr>
              </thead>
              <tbody>
                {failing.map(({ delivery, webhook }) => (
                  <FailingRow key={delivery.delivery_id} delivery={delivery} webhook={webhook} />
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
    </Section>
  );
}

function FailingRow({ delivery, webhook }: { delivery: Delivery; webhook: Webhook }) {
  const lastError = delivery.attempts.at(-1)?.error_class;
  return (
    <tr>
      <th scope="row">
        <code>{delivery.event_type}</code>
      </th>
      <td>
        <Link to={`/webhooks/${webhook.webhook_id}`}>{webhook.description || webhook.url}</Link>
      </td>
      <td>
        <DeliveryStatus delivery={delivery} />
      </td>
      <td>
        {delivery.attempt_count}
        {lastError && <span className="muted"> · last: {lastError}</span>}
      </td>
      <td>{formatDateTime(delivery.created_at)}</td>
    </tr>
  );
}
