import { useEffect, useRef, useState } from 'react';
import { Empty } from '../../components/empty';
import { ExpandableRow } from '../../components/expandable-row';
import { Form } from '../../components/form';
import { LoadMore } from '../../components/load-more';
import { Loaded } from '../../components/loaded';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { SelectControl } from '../../components/select-control';
import { TableHead } from '../../components/table-head';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { PagesState } from '../../use-pages';
import { DeliveryAttempts } from './delivery-attempts';
import { type Delivery, DeliveryStatus, isSettling } from './delivery-status';
import type { Webhook } from './webhook-status';

const statusFilters = [
  { value: '', label: 'Every status' },
  { value: 'pending', label: 'Pending' },
  { value: 'succeeded', label: 'Succeeded' },
  { value: 'failed', label: 'Failed, retrying' },
  { value: 'exhausted', label: 'Exhausted' },
];

/** Polls every second while a delivery is about to change, then every 10 s, so a forgotten tab costs little. */
function useRefreshWhileSettling(deliveries: PagesState<Delivery>): void {
  const polls = useRef(0);
  const data = deliveries.status === 'done' ? deliveries.data : undefined;
  const { reload } = deliveries;
  useEffect(() => {
    const now = Date.now();
    if (!data?.some((delivery) => isSettling(delivery, now))) {
      polls.current = 0;
      return;
    }
    polls.current += 1;
    const timer = setTimeout(reload, polls.current <= 30 ? 1000 : 10_000);
    return () => clearTimeout(timer);
  }, [data, reload]);
}

/**
 * The endpoint's delivery log, newest first: each delivery's state and, on demand, its attempts
 * with what the receiver answered. A test event is sent from here; the log refreshes by itself
 * while deliveries are under way.
 */
export function DeliveriesSection({
  webhook,
  deliveries,
  status,
  onStatus,
}: {
  webhook: Webhook;
  deliveries: PagesState<Delivery>;
  status: string;
  onStatus(status: string): void;
}) {
  const { client, workspace, role } = useSignedIn();
  const [open, setOpen] = useState<string>();
  const [notice, setNotice] = useState<string>();
  useRefreshWhileSettling(deliveries);
  const sendTest = async () => {
    setNotice(undefined);
    const delivery = await client.post('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/test', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id } },
      body: {},
    });
    setNotice(`A webhook.test event is on its way (delivery ${delivery.delivery_id}).`);
    setOpen(delivery.delivery_id);
    deliveries.reload();
  };
  return (
    <Section title="Deliveries">
      {can(role, 'webhooks.manage') && (
        <div className="test-event">
          <Form onSubmit={sendTest} submitLabel="Send a test event" busyLabel="Sending…" label="Send a test event">
            <p className="hint">
              A <code>webhook.test</code> event to this endpoint only, at once, whatever it subscribes to.
              {!webhook.enabled && ' The endpoint is disabled: enable it in the settings first.'}
            </p>
          </Form>
          {notice && <Notice>{notice}</Notice>}
        </div>
      )}
      <div className="list-controls">
        <SelectControl label="Show" value={status} options={statusFilters} onChange={onStatus} />
        <button type="button" className="button" onClick={deliveries.reload}>
          Refresh
        </button>
      </div>
      <Loaded state={deliveries} what="Loading the deliveries">
        {(list) =>
          list.length === 0 ? (
            <Empty title={status ? `No ${status} deliveries` : 'No deliveries yet'}>
              <p>Events of the workspace that this endpoint subscribes to appear here, with every attempt.</p>
            </Empty>
          ) : (
            <table className="data-table">
              <TableHead columns={['Event', 'Status', 'Attempts', 'Created']} actions="Details" />
              <tbody>
                {list.map((delivery) => {
                  const isOpen = open === delivery.delivery_id;
                  return (
                    <ExpandableRow
                      key={delivery.delivery_id}
                      rowProps={{ 'data-delivery-id': delivery.delivery_id }}
                      columns={5}
                      panelId={`delivery-${delivery.delivery_id}`}
                      open={isOpen}
                      onToggle={() => setOpen(isOpen ? undefined : delivery.delivery_id)}
                      toggle={{ label: 'Attempts', openLabel: 'Hide attempts', target: `of ${delivery.delivery_id}` }}
                      cells={
                        <>
                          <th scope="row">
                            <code>{delivery.event_type}</code>
                          </th>
                          <td>
                            <DeliveryStatus delivery={delivery} />
                          </td>
                          <td>{delivery.attempt_count}</td>
                          <td>{formatDateTime(delivery.created_at)}</td>
                        </>
                      }
                      panel={<DeliveryAttempts delivery={delivery} webhookId={webhook.webhook_id} onRedelivered={deliveries.reload} />}
                    />
                  );
                })}
              </tbody>
            </table>
          )
        }
      </Loaded>
      <LoadMore pages={deliveries} what="deliveries" />
    </Section>
  );
}
