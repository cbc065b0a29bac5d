import type { Knex } from '@switchboard/runtime/db';
import { Money } from '@switchboard/runtime/money';
import type { Db } from '@switchboard/runtime/sql';

// The usage aggregates per UTC hour and day (migrations/010_usage_rollups.ts), kept by the
// settlement in the transaction that inserts the usage rows, read by GET /v1/usage.

export type Bucket = 'hour' | 'day';
export type GroupColumn = 'key_id' | 'model' | 'tier' | 'region';

export const rollupTables: Record<Bucket, string> = { hour: 'usage_rollups_hourly', day: 'usage_rollups_daily' };

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;

/** The start of the UTC hour or day `at` falls in. */
export function bucketStartOf(at: Date, bucket: Bucket): Date {
  const unit = bucket === 'hour' ? hourMs : dayMs;
  return new Date(Math.floor(at.getTime() / unit) * unit);
}

/** What a newly inserted usage row adds to the aggregates. */
export interface RollupUsage {
  workspaceId: string;
  keyId: string;
  /** The model that served: the routed model, else the model asked for. */
  model: string;
  tier: string;
  /** '' when the usage was recorded without one. */
  region: string;
  inputTokens: string;
  outputTokens: string;
  costUsd: string;
  occurredAt: Date;
}

interface Sum {
  workspaceId: string;
  bucketStart: Date;
  keyId: string;
  model: string;
  tier: string;
  region: string;
  requests: bigint;
  inputTokens: bigint;
  outputTokens: bigint;
  costUsd: Money;
}

/** The sums of `usages` per bucket and group, in key order (concurrent batches take the row locks in the same order). */
function sumsOf(usages: RollupUsage[], bucket: Bucket): Sum[] {
  const sums = new Map<string, Sum>();
  for (const usage of usages) {
    const bucketStart = bucketStartOf(usage.occurredAt, bucket);
    const key = JSON.stringify([usage.workspaceId, bucketStart.getTime(), usage.keyId, usage.model, usage.tier, usage.region]);
    const sum = sums.get(key);
    if (sum) {
      sum.requests += 1n;
      sum.inputTokens += BigInt(usage.inputTokens);
      sum.outputTokens += BigInt(usage.outputTokens);
      sum.costUsd = sum.costUsd.plus(usage.costUsd);
    } else {
      sums.set(key, {
        workspaceId: usage.workspaceId,
        bucketStart,
        keyId: usage.keyId,
        model: usage.model,
        tier: usage.tier,
        region: usage.region,
        requests: 1n,
        inputTokens: BigInt(usage.inputTokens),
        outputTokens: BigInt(usage.outputTokens),
        costUsd: new Money(usage.costUsd),
      });
    }
  }
  const order = (s: Sum) => [s.workspaceId, s.bucketStart.toISOString(), s.keyId, s.model, s.tier, s.region];
  return [...sums.values()].sort((a, b) => {
    const [x, y] = [order(a), order(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
  });
}

const upsertColumns = 'workspace_id, bucket_start, key_id, model, tier, region, requests, input_tokens, output_tokens, cost_usd';
const upsertRows =
  'SELECT * FROM unnest(?::text[], ?::timestamptz[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::bigint[], ?::numeric[])';
const upsertConflict = `ON CONFLICT (workspace_id, bucket_start, key_id, model, tier, region) DO UPDATE SET
  requests = r.requests + excluded.requests, input_tokens = r.input_tokens + excluded.input_tokens,
  output_tokens = r.output_tokens + excluded.output_tokens, cost_usd = r.cost_usd + excluded.cost_usd`;

const bindingsOf = (sums: Sum[]): Knex.RawBinding[] => [
  sums.map((s) => s.workspaceId),
  sums.map((s) => s.bucketStart.toISOString()),
  sums.map((s) => s.keyId),
  sums.map((s) => s.model),
  sums.map((s) => s.tier),
  sums.map((s) => s.region),
  sums.map((s) => s.requests.toString()),
  sums.map((s) => s.inputTokens.toString()),
  sums.map((s) => s.outputTokens.toString()),
  sums.map((s) => s.costUsd.toFixed()),
];

/**
 * The two upserts of `usages`' sums into the hourly and daily aggregates, as the definitions of
 * two data-modifying WITH queries (`rollup_hourly AS (…), rollup_daily AS (…)`) for a statement
 * to embed; each upserts only where `condition` (SQL) holds. The sums are made here.
 */
export function rollupUpserts(usages: RollupUsage[], condition = 'TRUE'): { sql: string; bindings: Knex.RawBinding[] } {
  const upsert = (bucket: Bucket) =>
    `rollup_${bucket === 'hour' ? 'hourly' : 'daily'} AS (
       INSERT INTO ${rollupTables[bucket]} AS r (${upsertColumns}) ${upsertRows} WHERE ${condition}
       ${upsertConflict}
     )`;
  return {
    sql: `${upsert('hour')}, ${upsert('day')}`,
    bindings: [...bindingsOf(sumsOf(usages, 'hour')), ...bindingsOf(sumsOf(usages, 'day'))],
  };
}

/**
 * Adds `usages` (rows just inserted, each once: the caller passes only what its INSERT returned)
 * to the hourly and daily aggregates, in `trx`: one upsert per table, both in one statement.
 */
export async function addToRollups(trx: Knex.Transaction, usages: RollupUsage[]): Promise<void> {
  if (usages.length === 0) return;
  const upserts = rollupUpserts(usages);
  await trx.raw(`WITH ${upserts.sql} SELECT 1`, upserts.bindings);
}

/**
 * The aggregation of usage_records into a rollup table, as the migration's backfill does it (and
 * the benchmark's seeding): UTC buckets, the model that served, '' for no region. `where` filters
 * usage_records (the migration: none).
 */
export function rollupFromUsageRecordsSql(bucket: Bucket, where = 'TRUE'): string {
  return `INSERT INTO ${rollupTables[bucket]} (workspace_id, bucket_start, key_id, model, tier, region, requests, input_tokens, output_tokens, cost_usd)
    SELECT workspace_id, date_trunc('${bucket}', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', key_id,
           COALESCE(routed_model, model), tier, COALESCE(region, ''), count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)
      FROM usage_records WHERE ${where}
     GROUP BY 1, 2, 3, 4, 5, 6`;
}

export interface RollupRow {
  /** The bucket's start: seconds since the epoch, and RFC 3339 UTC (`2026-11-02T00:00:00Z`), both made by Postgres. */
  bucket_epoch: string;
  bucket_iso: string;
  key_id?: string;
  model?: string;
  tier?: string;
  region?: string;
  requests: string;
  input_tokens: string;
  output_tokens: string;
  cost_usd: string;
}

export interface RollupQuery {
  workspaceId: string;
  bucket: Bucket;
  /** Bucket starts at or after `from` and before `to`. */
  from: Date;
  to: Date;
  groupBy: GroupColumn[];
  keyId?: string;
  /** At most this many rows are read. */
  limit: number;
}

/** One row per bucket and group with usage, in bucket order then group order. */
export async function readRollups(db: Db, query: RollupQuery): Promise<RollupRow[]> {
  const groups = query.groupBy.join(', ');
  const keyFilter = query.keyId === undefined ? '' : 'AND key_id = ?';
  const bindings: Knex.RawBinding[] = [query.workspaceId, query.from.toISOString(), query.to.toISOString()];
  if (query.keyId !== undefined) bindings.push(query.keyId);
  bindings.push(query.limit);
  const { rows } = await db.raw<{ rows: RollupRow[] }>(
    `SELECT extract(epoch FROM bucket_start)::bigint::text AS bucket_epoch,
            to_char(bucket_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS bucket_iso${groups ? `, ${groups}` : ''}, sum(requests)::text AS requests, sum(input_tokens)::text AS input_tokens,
            sum(output_tokens)::text AS output_tokens, sum(cost_usd)::text AS cost_usd
       FROM ${rollupTables[query.bucket]}
      WHERE workspace_id = ? AND bucket_start >= ? AND bucket_start < ? ${keyFilter}
      GROUP BY bucket_start${groups ? `, ${groups}` : ''}
      ORDER BY bucket_start${groups ? `, ${groups.replace(/(\w+)/g, '$1 COLLATE "C"')}` : ''}
      LIMIT ?`,
    bindings,
  );
  return rows;
}
