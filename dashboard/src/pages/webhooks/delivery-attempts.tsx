import { Form } from '../../components/form';
import { formatDateTime } from '../../format';
import { can } from '../../permissions';
import { useSignedIn } from '../../session';
import type { Delivery } from './delivery-status';
import { explainErrorClass } from './error-classes';

const triggers: Record<string, string> = { event: 'first attempt', retry: 'automatic retry', manual: 'redelivery', test: 'test' };

/** Every attempt of a delivery, oldest first: the status code, error class, timing and the start of the response body; and redelivering it. */
export function DeliveryAttempts({ delivery, webhookId, onRedelivered }: { delivery: Delivery; webhookId: string; onRedelivered(): void }) {
  const { client, workspace, role } = useSignedIn();
  const redeliver = async () => {
    await client.post('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhookId, delivery_id: delivery.delivery_id } },
      body: {},
    });
    onRedelivered();
  };
  return (
    <div className="panel">
      <p className="hint">
        Delivery <code>{delivery.delivery_id}</code> of event <code>{delivery.event_id}</code>: the <code>webhook-id</code> header of every attempt.
      </p>
      {delivery.attempts.length === 0 ? (
        <p>No attempt yet: the first one is on its way.</p>
      ) : (
        <ol className="attempts">
          {delivery.attempts.map((attempt) => (
            <li key={attempt.attempt_id} className="attempt">
              <dl className="facts">
                <dt>Result</dt>
                <dd>
                  <span className={attempt.status === 'success' ? 'badge ok' : 'badge bad'}>{attempt.status}</span>
                  {attempt.error_class && ` (${attempt.error_class})`}
                  {attempt.error_class && explainErrorClass(attempt.error_class) && <div className="hint">{explainErrorClass(attempt.error_class)}</div>}
                </dd>
                <dt>Status code</dt>
                <dd>{attempt.response_status_code === 0 ? 'no response' : attempt.response_status_code}</dd>
                <dt>Duration</dt>
                <dd>{attempt.duration_ms} ms</dd>
                <dt>When</dt>
                <dd>
                  {formatDateTime(attempt.created_at)}, {triggers[attempt.trigger] ?? attempt.trigger}
                </dd>
                <dt>URL</dt>
                <dd>
                  <code>{attempt.url}</code>
                </dd>
                {attempt.response_body != null && (
                  <>
                    <dt>Response body</dt>
                    <dd>
                      {/* At most 4 KiB, shown whole: a scrolling box would need the keyboard's focus. */}
                      <pre className="response-body">{attempt.response_body || '(empty)'}</pre>
                    </dd>
                  </>
                )}
              </dl>
            </li>
          ))}
        </ol>
      )}
      {can(role, 'webhooks.manage') && (
        <Form onSubmit={redeliver} submitLabel="Redeliver" busyLabel="Queueing…" label={`Redeliver ${delivery.delivery_id}`}>
          <p className="hint">One more attempt now, with the same body and webhook-id; it uses up no retry.</p>
        </Form>
      )}
    </div>
  );
}
