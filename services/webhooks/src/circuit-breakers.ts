/**
 * One circuit breaker per endpoint, in this process: after `threshold` failures in a row the
 * endpoint gets no attempts for `cooldownMs` (its due deliveries wait, spending none of their
 * retries), then one probe; a success closes the circuit, a failure opens it again. A dead
 * receiver so costs one attempt per cooldown instead of a connection per due delivery, and never
 * the slots of another endpoint.
 */
/** How long a circuit is kept without any attempt of its endpoint. */
const staleAfterMs = 3_600_000;

export class CircuitBreakers {
  private readonly circuits = new Map<string, { failures: number; openUntil: number; probing: boolean; lastAt: number }>();

  constructor(
    private readonly options: { threshold: number; cooldownMs: number },
    private readonly now: () => number = Date.now,
  ) {}

  record(endpointId: string, success: boolean): void {
    if (success) {
      this.circuits.delete(endpointId);
      return;
    }
    const circuit = this.circuits.get(endpointId) ?? { failures: 0, openUntil: 0, probing: false, lastAt: 0 };
    circuit.failures += 1;
    circuit.lastAt = this.now();
    circuit.probing = false;
    if (circuit.failures >= this.options.threshold) circuit.openUntil = this.now() + this.options.cooldownMs;
    this.circuits.set(endpointId, circuit);
  }

  /** How many attempts may run for each endpoint whose circuit is not closed (0: open). */
  limits(): Map<string, number> {
    const limits = new Map<string, number>();
    const now = this.now();
    for (const [endpointId, circuit] of this.circuits) {
      // An endpoint with no attempt for long (deleted, disabled, nothing due) is forgotten.
      if (!circuit.probing && now - circuit.lastAt > staleAfterMs) {
        this.circuits.delete(endpointId);
        continue;
      }
      if (circuit.failures < this.options.threshold) continue;
      limits.set(endpointId, circuit.openUntil > now || circuit.probing ? 0 : 1);
    }
    return limits;
  }

  /** How many endpoints' circuits are open now (no attempts until their cooldown ends). */
  openCount(): number {
    const now = this.now();
    let open = 0;
    for (const circuit of this.circuits.values()) if (circuit.failures >= this.options.threshold && circuit.openUntil > now) open++;
    return open;
  }

  /** An attempt ended without an outcome (put back, dropped, failed before sending): a probe it was is not one. */
  released(endpointId: string): void {
    const circuit = this.circuits.get(endpointId);
    if (circuit) circuit.probing = false;
  }

  /** A claimed attempt of a half-open circuit is its probe. */
  claimed(endpointId: string): void {
    const circuit = this.circuits.get(endpointId);
    if (circuit && circuit.failures >= this.options.threshold) circuit.probing = true;
  }

  /** When the next open circuit lets a probe through, if any. */
  nextProbeAt(): number | undefined {
    let next: number | undefined;
    for (const circuit of this.circuits.values()) {
      if (circuit.failures >= this.options.threshold && !circuit.probing && (next === undefined || circuit.openUntil < next)) next = circuit.openUntil;
    }
    return next;
  }
}
