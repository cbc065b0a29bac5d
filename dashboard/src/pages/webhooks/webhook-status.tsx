import type { Schemas } from '@switchboard/sdk';
import { formatDateTime } from '../../format';

export type Webhook = Schemas['switchboard.webhooks.v1.Webhook'];

const disabledBecause: Record<string, string> = {
  manual: 'disabled by hand',
  endpoint_gone: 'disabled: the receiver answered 410 Gone',
  failing: 'disabled: failing for 5 days',
  organization_deleted: 'disabled: the organization was deleted',
};

/** Whether the endpoint receives events, and why not; failing since when. */
export function WebhookStatus({ webhook }: { webhook: Webhook }) {
  if (!webhook.enabled) {
    const reason = webhook.disabled_reason ?? 'manual';
    return <span className="badge bad">{disabledBecause[reason] ?? `disabled (${reason})`}</span>;
  }
  if (webhook.failing_since) return <span className="badge warn">failing since {formatDateTime(webhook.failing_since)}</span>;
  return <span className="badge ok">enabled</span>;
}
