import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';
import { addToRollups, type RollupUsage, rollupUpserts } from './usage-rollups.js';

// Priced usage, one row per generation (the generation registry).

export interface UsageRow {
  id: string;
  generation_id: string;
  workspace_id: string;
  key_id: string;
  model: string;
  routed_model: string | null;
  tier: string;
  cost_usd: string;
  occurred_at: Date;
}

export interface NewUsage {
  id: string;
  generationId: string;
  workspaceId: string;
  keyId: string;
  model: string;
  routedModel: string | null;
  tier: string;
  inputTokens: string;
  outputTokens: string;
  upstreamCostUsd: string | null;
  costUsd: string;
  planId: string;
  pricingVersion: string;
  reservationId: string | null;
  occurredAt: Date;
  /** What the data plane reports beside the usage (docs/api/generations.md); absent through RecordUsage. */
  facts?: GenerationFacts;
}

/** The facts of a generation the activity log shows; each null when the data plane did not report it. */
export interface GenerationFacts {
  region: string | null;
  streamed: boolean | null;
  status: string | null;
  latencyMs: number | null;
  timeToFirstTokenMs: number | null;
  overheadMs: number | null;
  conversationId: string | null;
}

const usageColumns = 'id, generation_id, workspace_id, key_id, model, routed_model, tier, cost_usd::text AS cost_usd, occurred_at';

/** What a usage row adds to the aggregates: the model that served, '' for no region. */
const rollupOf = (usage: NewUsage): RollupUsage => ({
  workspaceId: usage.workspaceId,
  keyId: usage.keyId,
  model: usage.routedModel ?? usage.model,
  tier: usage.tier,
  region: usage.facts?.region ?? '',
  inputTokens: usage.inputTokens,
  outputTokens: usage.outputTokens,
  costUsd: usage.costUsd,
  occurredAt: usage.occurredAt,
});

/**
 * Inserts a batch of usage rows, skipping generations recorded already (or twice in the batch),
 * and adds exactly the rows it inserted to the hourly and daily aggregates
 * (store/usage-rollups.ts), in the same transaction; returns the generation ids it inserted.
 * Every path that records usage goes through here, so the aggregates never miss a row nor count
 * one twice. One statement in the usual case: the INSERT, and the upserts of the batch's sums
 * made only if it inserted every row; when it inserted some only (a redelivery), the sums of
 * those are added by a second statement.
 */
export async function insertUsages(trx: Knex.Transaction, usages: NewUsage[]): Promise<Set<string>> {
  if (usages.length === 0) return new Set();
  const insert = insertQuery(trx, usages).toSQL();
  const upserts = rollupUpserts(usages.map(rollupOf), `(SELECT count(*) FROM inserted) = ${usages.length}`);
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>(`WITH inserted AS (${insert.sql}), ${upserts.sql} SELECT id FROM inserted`, [
    ...insert.bindings,
    ...upserts.bindings,
  ]);
  const ids = new Set(rows.map((row) => row.id));
  const fresh = usages.filter((usage) => ids.has(usage.id));
  if (fresh.length > 0 && fresh.length < usages.length) await addToRollups(trx, fresh.map(rollupOf));
  return new Set(fresh.map((usage) => usage.generationId));
}

/**
 * The usage rows alone (the aggregates left as they are): what `insertUsages` inserts, returning
 * the usages it inserted (by row id: of two usages of one generation in the batch, the one
 * inserted). The benchmark compares it with `insertUsages`.
 */
export async function insertUsageRows(trx: Knex.Transaction, usages: NewUsage[]): Promise<NewUsage[]> {
  if (usages.length === 0) return [];
  const inserted: Array<{ id: string }> = await insertQuery(trx, usages);
  const ids = new Set(inserted.map((row) => row.id));
  return usages.filter((usage) => ids.has(usage.id));
}

/** The INSERT of the usage rows, skipping generations recorded already, returning the ids it inserted. */
function insertQuery(trx: Knex.Transaction, usages: NewUsage[]) {
  return trx('usage_records')
    .insert(
      usages.map((usage) => ({
        id: usage.id,
        generation_id: usage.generationId,
        workspace_id: usage.workspaceId,
        key_id: usage.keyId,
        model: usage.model,
        routed_model: usage.routedModel,
        tier: usage.tier,
        input_tokens: usage.inputTokens,
        output_tokens: usage.outputTokens,
        upstream_cost_usd: usage.upstreamCostUsd,
        cost_usd: usage.costUsd,
        plan_id: usage.planId,
        pricing_version: usage.pricingVersion,
        reservation_id: usage.reservationId,
        occurred_at: usage.occurredAt,
        region: usage.facts?.region ?? null,
        streamed: usage.facts?.streamed ?? null,
        status: usage.facts?.status ?? null,
        latency_ms: usage.facts?.latencyMs ?? null,
        time_to_first_token_ms: usage.facts?.timeToFirstTokenMs ?? null,
        overhead_ms: usage.facts?.overheadMs ?? null,
        conversation_id: usage.facts?.conversationId ?? null,
      })),
    )
    .onConflict('generation_id')
    .ignore()
    .returning('id');
}

/** The workspace whose usage a generation is, if any (the miss path of a lookup: a probe of another workspace's). */
export async function workspaceOfGeneration(db: Db, generationId: string): Promise<string | undefined> {
  const row = await db('usage_records').where({ generation_id: generationId }).first('workspace_id');
  return row?.workspace_id;
}

export async function findUsageByGeneration(db: Db, generationId: string): Promise<UsageRow | undefined> {
  const { rows } = await db.raw<{ rows: UsageRow[] }>(`SELECT ${usageColumns} FROM usage_records WHERE generation_id = ?`, [generationId]);
  return rows[0];
}

export interface DayRow {
  date: string;
  cost_usd: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  /** The day's cost and requests per tier; tiers without usage that day are absent. */
  by_tier: Record<string, { cost_usd: string; requests: number }>;
}

/** One row per UTC day from `from` to `to` (dates, inclusive), days without usage as zeros. */
export async function usageByDay(db: Db, workspaceId: string, from: string, to: string): Promise<DayRow[]> {
  const { rows } = await db.raw<{ rows: DayRow[] }>(
    `WITH days AS (SELECT generate_series(?::date, ?::date, interval '1 day')::date AS day),
     per_tier AS (
       SELECT (occurred_at AT TIME ZONE 'UTC')::date AS day, tier, sum(cost_usd) AS cost, count(*) AS requests,
              sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
         FROM usage_records
        WHERE workspace_id = ? AND occurred_at >= (?::date)::timestamp AT TIME ZONE 'UTC' AND occurred_at < (?::date + 1)::timestamp AT TIME ZONE 'UTC'
        GROUP BY 1, 2
     ),
     agg AS (
       SELECT day, sum(cost) AS cost, sum(requests) AS requests, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
              jsonb_object_agg(tier, jsonb_build_object('cost_usd', cost::text, 'requests', requests)) AS by_tier
         FROM per_tier GROUP BY day
     )
     SELECT to_char(days.day, 'YYYY-MM-DD') AS date, COALESCE(agg.cost, 0)::text AS cost_usd, COALESCE(agg.requests, 0) AS requests,
            COALESCE(agg.input_tokens, 0)::bigint AS input_tokens, COALESCE(agg.output_tokens, 0)::bigint AS output_tokens,
            COALESCE(agg.by_tier, '{}'::jsonb) AS by_tier
       FROM days LEFT JOIN agg USING (day) ORDER BY days.day`,
    [from, to, workspaceId, from, to],
  );
  return rows;
}

export interface TierRow {
  tier: string;
  cost_usd: string;
  requests: number;
  input_tokens: string;
  output_tokens: string;
  upstream_cost_usd: string;
}

/** Per tier since `since`: what was charged, and what re-pricing it under another plan needs. */
export async function usageByTier(db: Db, workspaceId: string, since: Date): Promise<TierRow[]> {
  const { rows } = await db.raw<{ rows: TierRow[] }>(
    `SELECT tier, sum(cost_usd)::text AS cost_usd, count(*) AS requests, sum(input_tokens)::text AS input_tokens,
            sum(output_tokens)::text AS output_tokens, COALESCE(sum(upstream_cost_usd), 0)::text AS upstream_cost_usd
       FROM usage_records WHERE workspace_id = ? AND occurred_at >= ? GROUP BY tier`,
    [workspaceId, since],
  );
  return rows;
}
