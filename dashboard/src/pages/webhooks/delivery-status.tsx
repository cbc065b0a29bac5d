import type { Schemas } from '@switchboard/sdk';
import { formatDateTime } from '../../format';
import { nextAttemptWording } from './next-attempt';

export type Delivery = Schemas['switchboard.webhooks.v1.Delivery'];

const badges: Record<string, string> = { pending: 'badge warn', succeeded: 'badge ok', failed: 'badge warn', exhausted: 'badge bad' };

/** A delivery's state, with when it is tried again while it failed. */
export function DeliveryStatus({ delivery }: { delivery: Delivery }) {
  const wording = nextAttemptWording(delivery.status, delivery.next_attempt_at, Date.now());
  return (
    <>
      <span className={badges[delivery.status] ?? 'badge'}>{delivery.status}</span>
      {wording && (
        <div className="hint">
          {wording} {formatDateTime(delivery.next_attempt_at)}
        </div>
      )}
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
