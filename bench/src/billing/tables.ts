import { Money } from '@switchboard/runtime/money';
import type pg from 'pg';
import { pollUntil } from '../measure/loop.js';
import type { Account } from './accounts.js';
import { pollIntervalMs } from './settings.js';

/**
 * Where the usages are when the calls end: the usage rows billing has (settled, for the work
 * stream), its outbox rows not yet published, the usage events the keys service applied.
 */
export async function pipelineBacklog(db: pg.Client): Promise<{ usageRows: number; unpublishedOutboxRows: number; keysAppliedUsageEvents: number }> {
  const { rows } = await db.query<{ usage_rows: string; unpublished: string; applied: string }>(
    `SELECT (SELECT count(*) FROM billing.usage_records) AS usage_rows,
            (SELECT count(*) FROM billing.outbox WHERE published_at IS NULL) AS unpublished,
            (SELECT count(*) FROM keys.processed_events WHERE consumer = 'keys-billing-usage-recorded') AS applied`,
  );
  return { usageRows: Number(rows[0].usage_rows), unpublishedOutboxRows: Number(rows[0].unpublished), keysAppliedUsageEvents: Number(rows[0].applied) };
}

/**
 * Waits until billing has `rows` usage rows, every usage sent so far settled (for the work
 * stream: consumed, debited, its event in the outbox): the time (performance.now()) it saw them.
 */
export function waitUntilSettled(db: pg.Client, rows: number, settings: { stallTimeoutMs: number; maxWaitMs: number }): Promise<number> {
  const started = performance.now();
  return pollUntil(
    async () => Number((await db.query<{ rows: string }>('SELECT count(*) AS rows FROM billing.usage_records')).rows[0].rows),
    (count) => count >= rows,
    { intervalMs: pollIntervalMs, stallTimeoutMs: settings.stallTimeoutMs, deadline: started + settings.maxWaitMs },
    (count, stillMs) =>
      `after ${Math.round(performance.now() - started)} ms (unchanged for the last ${stillMs} ms) billing has ${count} usage rows of the ${rows} sent`,
  );
}

/** Billing's own tables against the answers: one row per answered usage, their sum per key, every outbox row published. */
export async function checkBillingTables(db: pg.Client, accounts: Account[]): Promise<string[]> {
  const problems: string[] = [];
  const { rows } = await db.query<{ key_id: string; rows: string; cost: string }>(
    'SELECT key_id, count(*) AS rows, sum(cost_usd)::text AS cost FROM billing.usage_records WHERE key_id = ANY($1) GROUP BY key_id',
    [accounts.map((a) => a.keyId)],
  );
  const byKey = new Map(rows.map((row) => [row.key_id, row]));
  for (const account of accounts) {
    const row = byKey.get(account.keyId);
    if (Number(row?.rows ?? 0) !== account.calls || !new Money(row?.cost ?? '0').eq(account.recorded)) {
      problems.push(
        `key ${account.keyId}: ${row?.rows ?? 0} usage rows summing ${row?.cost ?? '0'}, but ${account.calls} answers summing ${account.recorded.toFixed()}`,
      );
    }
  }
  const { rows: outbox } = await db.query<{ unpublished: string; usage_events: string; usage_rows: string }>(
    `SELECT (SELECT count(*) FROM billing.outbox WHERE published_at IS NULL) AS unpublished,
            (SELECT count(*) FROM billing.outbox WHERE payload->>'type' = 'billing.usage.recorded') AS usage_events,
            (SELECT count(*) FROM billing.usage_records) AS usage_rows`,
  );
  if (outbox[0].unpublished !== '0') problems.push(`${outbox[0].unpublished} outbox rows are still unpublished after the keys service showed every usage`);
  if (outbox[0].usage_events !== outbox[0].usage_rows)
    problems.push(`${outbox[0].usage_rows} usage rows but ${outbox[0].usage_events} billing.usage.recorded outbox rows`);
  return problems;
}
