import type { Schemas } from '@switchboard/sdk';
import { formatDateTime } from '../../format';

export type Delivery = Schemas['switchboard.webhooks.v1.Delivery'];

const badges: Record<string, string> = { pending: 'badge warn', succeeded: 'badge ok', failed: 'badge warn', exhausted: 'badge bad' };

/**
 * When the delivery's next attempt is, in words: a retry still to come ("next retry at …"), or
 * one whose time has passed and is being made ("retrying since …"); undefined when none is planned.
 */
export function nextAttemptText(delivery: Pick<Delivery, 'status' | 'next_attempt_at'>, now: number): string | undefined {
  if (!delivery.next_attempt_at) return undefined;
  const at = formatDateTime(delivery.next_attempt_at);
  const due = Date.parse(delivery.next_attempt_at) <= now;
  if (delivery.status === 'failed') return due ? `retrying since ${at}` : `next retry at ${at}`;
  return due ? `next attempt due since ${at}` : `next attempt at ${at}`;
}

/** A delivery's state, with when it is tried again while it failed. */
export function DeliveryStatus({ delivery }: { delivery: Delivery }) {
  const next = nextAttemptText(delivery, Date.now());
  return (
    <>
      <span className={badges[delivery.status] ?? 'badge'}>{delivery.status}</span>
      {next && <div className="hint">{next}</div>}
    </>
  );
}

/**
 * Whether the delivery will change soon by itself: its first attempt is waiting, or an attempt
 * is due within a minute (a retry, or a redelivery, which leaves a succeeded delivery succeeded).
 */
export function isSettling(delivery: Delivery, now: number): boolean {
  if (delivery.status === 'pending') return true;
  return delivery.next_attempt_at != null && Date.parse(delivery.next_attempt_at) - now < 60_000;
}
