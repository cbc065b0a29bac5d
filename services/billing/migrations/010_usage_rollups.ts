import type { Knex } from '@switchboard/runtime/db';

/**
 * The usage aggregates GET /v1/usage reads (docs/api/billing.md#usage-analytics): the settled
 * usage per UTC hour and per UTC day, per workspace, key, model that served (the routed model,
 * else the model asked for), tier and region ('' for usage recorded without one). The settlement
 * adds the rows it inserts to both in the same transaction (services/billing/src/store/usage-rollups.ts);
 * the rows settled before this migration are added here. `cost_usd` is `numeric` without a
 * scale, as `usage_records.cost_usd`: the sums are exact.
 */
const tables = [
  { name: 'usage_rollups_hourly', unit: 'hour' },
  { name: 'usage_rollups_daily', unit: 'day' },
] as const;

export async function up(knex: Knex): Promise<void> {
  // The backfill reads every usage record: a request's statement timeout (runtime/src/db.ts) would
  // cancel it on a large table and hold the rollout back. This migration's transaction only.
  await knex.raw('SET LOCAL statement_timeout = 0');
  for (const { name, unit } of tables) {
    await knex.raw(`
      CREATE TABLE ${name} (
        workspace_id text NOT NULL,
        bucket_start timestamptz NOT NULL,
        key_id text NOT NULL,
        model text NOT NULL,
        tier text NOT NULL,
        region text NOT NULL,
        requests bigint NOT NULL CHECK (requests >= 0),
        input_tokens bigint NOT NULL CHECK (input_tokens >= 0),
        output_tokens bigint NOT NULL CHECK (output_tokens >= 0),
        cost_usd numeric NOT NULL CHECK (cost_usd >= 0),
        PRIMARY KEY (workspace_id, bucket_start, key_id, model, tier, region)
      )`);
    // The same aggregation as the settlement's (UTC buckets, the model that served, '' for no region).
    await knex.raw(`
      INSERT INTO ${name} (workspace_id, bucket_start, key_id, model, tier, region, requests, input_tokens, output_tokens, cost_usd)
      SELECT workspace_id, date_trunc('${unit}', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', key_id,
             COALESCE(routed_model, model), tier, COALESCE(region, ''), count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)
        FROM usage_records
       GROUP BY 1, 2, 3, 4, 5, 6`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const { name } of tables) await knex.schema.dropTableIfExists(name);
}
