import { Empty } from '../components/empty';
import { LoadMore } from '../components/load-more';
import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { TableHead } from '../components/table-head';
import { formatDateTime } from '../format';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { usePages } from '../use-pages';
import { CreateSection } from './webhooks/create-section';
import { describeEvents } from './webhooks/event-types';
import { WebhookStatus } from './webhooks/webhook-status';

/** The workspace's webhook endpoints, and registering a new one (owners and admins). */
export function WebhooksPage() {
  const { client, workspace, role } = useSignedIn();
  const webhooks = usePages(
    (after) => client.get('/v1/workspaces/{workspace_id}/webhooks', { params: { path: { workspace_id: workspace.org_id }, query: { limit: 50, after } } }),
    [client, workspace.org_id],
  );
  return (
    <Page title="Webhooks">
      <p>
        HTTPS endpoints that receive the events of {workspace.name} as signed POST requests (Standard Webhooks), retried for about a day. How to verify them:{' '}
        <a href="/docs">the API reference</a>.
      </p>
      <Section title="Endpoints">
        <Loaded state={webhooks} what="Loading the endpoints">
          {(list) =>
            list.length === 0 ? (
              <Empty title="No endpoints yet">{can(role, 'webhooks.manage') && <p>Add one below: its URL, and the events it receives.</p>}</Empty>
            ) : (
              <table className="data-table">
                <TableHead columns={['URL', 'Events', 'Status', 'Created']} />
                <tbody>
                  {list.map((webhook) => (
                    <tr key={webhook.webhook_id}>
                      <th scope="row">
                        <Link to={`/webhooks/${encodeURIComponent(webhook.webhook_id)}`}>{webhook.url}</Link>
                        {webhook.description && <div className="hint">{webhook.description}</div>}
                      </th>
                      <td>{describeEvents(webhook.events)}</td>
                      <td>
                        <WebhookStatus webhook={webhook} />
                      </td>
                      <td>{formatDateTime(webhook.created_at)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )
          }
        </Loaded>
        <LoadMore pages={webhooks} what="endpoints" />
      </Section>
      {can(role, 'webhooks.manage') && <CreateSection onCreated={webhooks.reload} />}
    </Page>
  );
}
