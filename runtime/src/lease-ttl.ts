/**
 * A budget lease's two clocks (docs/money-path.md#leases): its owner holds the row for
 * LEASE_TTL after each grant or renewal, so a lease not renewed returns what it did not spend at
 * its TTL; the holder may spend from it only until half of that has passed. The other half is
 * the time usage of requests still in flight when a holder lost touch has to settle before the
 * room is granted again (a chaos run passed a cap by 5% when both ended together).
 */
export function holderMarginMs(leaseTtlMs: number): number {
  return Math.floor(leaseTtlMs / 2);
}
