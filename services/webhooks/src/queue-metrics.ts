import type { Knex } from '@switchboard/runtime/db';
import type { Metrics } from '@switchboard/runtime/metrics';
import type { CircuitBreakers } from './circuit-breakers.js';
import { oldestDueAge, queueDepth } from './store/deliveries.js';
import { countByHealth } from './store/endpoints.js';

/**
 * The delivery queue and the endpoints' failure state, read when scraped. Counts, not a series
 * per endpoint: labels stay bounded however many endpoints workspaces register (an endpoint's own
 * state is in its delivery log).
 */
export function watchQueue(metrics: Metrics, deps: { db: Knex; circuits: CircuitBreakers }): void {
  metrics.gauge('webhook_deliveries', 'Deliveries with an attempt to come: due now, scheduled for later, in flight.', ['state'], async (gauge) => {
    const depth = await queueDepth(deps.db);
    gauge.set({ state: 'due' }, depth.due);
    gauge.set({ state: 'scheduled' }, depth.scheduled);
    gauge.set({ state: 'in_flight' }, depth.inFlight);
  });
  metrics.gauge('webhook_oldest_due_age_seconds', 'How long the oldest due delivery has waited for its attempt (0 when none).', [], async (gauge) => {
    gauge.set(await oldestDueAge(deps.db));
  });
  metrics.gauge('webhook_endpoints', 'Endpoints by failure state: healthy, failing (enabled, failing since a time), disabled.', ['state'], async (gauge) => {
    const counts = await countByHealth(deps.db);
    gauge.set({ state: 'healthy' }, counts.healthy);
    gauge.set({ state: 'failing' }, counts.failing);
    gauge.set({ state: 'disabled' }, counts.disabled);
  });
  metrics.gauge('webhook_open_circuits', 'Endpoints whose circuit is open in this process (their due deliveries wait, spending no retries).', [], (gauge) => {
    gauge.set(deps.circuits.openCount());
  });
}
