/**
 * How the delivery log words a delivery's next attempt at `nextAttemptAt`, seen at `now`: a retry
 * still to come is "next retry at", one whose time has passed (being made) "retrying since"; for a
 * delivery that is not failing (its first attempt, a redelivery) "next attempt at" or "next
 * attempt due since". Undefined when no attempt is planned.
 */
export function nextAttemptWording(status: string, nextAttemptAt: string | null | undefined, now: number): string | undefined {
  if (!nextAttemptAt) return undefined;
  const due = Date.parse(nextAttemptAt) <= now;
  if (status === 'failed') return due ? 'retrying since' : 'next retry at';
  return due ? 'next attempt due since' : 'next attempt at';
}
