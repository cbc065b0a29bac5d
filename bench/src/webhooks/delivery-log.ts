import type pg from 'pg';
import { sleep } from '../measure/loop.js';

/**
 * The endpoint's delivery log: deliveries by status, once `expected` succeeded or 10 s passed
 * (the last attempts are recorded just after their response arrived: the log gets a moment to
 * settle), and attempts by status and error class.
 */
export async function deliveryLog(db: pg.Client, webhookId: string, expected: number) {
  let deliveries: Record<string, number> = {};
  for (const settleBy = performance.now() + 10_000; ; await sleep(50)) {
    const { rows } = await db.query<{ status: string; n: string }>(
      'SELECT status, count(*)::text AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY status',
      [webhookId],
    );
    deliveries = Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
    if ((deliveries.succeeded ?? 0) >= expected || performance.now() > settleBy) break;
  }
  const { rows: attemptRows } = await db.query<{ status: string; error_class: string | null; n: string }>(
    `SELECT a.status, a.error_class, count(*)::text AS n FROM webhooks.attempts a JOIN webhooks.deliveries d ON d.id = a.delivery_id
      WHERE d.endpoint_id = $1 GROUP BY a.status, a.error_class`,
    [webhookId],
  );
  const attempts = Object.fromEntries(attemptRows.map((row) => [`${row.status}${row.error_class ? `:${row.error_class}` : ''}`, Number(row.n)]));
  return { deliveries, attempts };
}
