import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// The generation registry as the activity log reads it (usage_records and the feedback joined
// by generation id), and the feedback projected from `feedback.recorded`.

export interface GenerationRow {
  id: string;
  generation_id: string;
  key_id: string;
  model: string;
  routed_model: string | null;
  tier: string;
  region: string | null;
  input_tokens: string;
  output_tokens: string;
  cost_usd: string;
  upstream_cost_usd: string | null;
  streamed: boolean | null;
  status: string | null;
  latency_ms: number | null;
  time_to_first_token_ms: number | null;
  overhead_ms: string | null;
  conversation_id: string | null;
  occurred_at: Date;
  cursor_micros: string;
  rating: number | null;
  tags: string[] | null;
}

/** Which generations a reader sees: a workspace's, or one key's of it. */
export interface GenerationScope {
  workspaceId: string;
  keyId?: string;
}

const columns = `u.id, u.generation_id, u.key_id, u.model, u.routed_model, u.tier, u.region, u.input_tokens::text AS input_tokens,
  u.output_tokens::text AS output_tokens, u.cost_usd::text AS cost_usd, u.upstream_cost_usd::text AS upstream_cost_usd, u.streamed,
  u.status, u.latency_ms, u.time_to_first_token_ms, u.overhead_ms::text AS overhead_ms, u.conversation_id, u.occurred_at,
  ${microsOf('u.occurred_at')} AS cursor_micros, f.rating, f.tags`;

/** Feedback of another workspace never joins (the generation id is checked by conversations, and here again). */
const joined = 'usage_records u LEFT JOIN generation_feedback f ON f.generation_id = u.generation_id AND f.workspace_id = u.workspace_id';

/** A page of the scope's generations, newest first (`limit + 1` rows: pageOf splits them). */
export async function listGenerations(db: Db, scope: GenerationScope, page: PageQuery): Promise<GenerationRow[]> {
  const leading: Knex.RawBinding[] = [scope.workspaceId];
  let byKey = '';
  if (scope.keyId !== undefined) {
    byKey = 'AND u.key_id = ?';
    leading.push(scope.keyId);
  }
  const { cursor, bindings } = pageClause(page, 'u.occurred_at', 'u.id', leading);
  const { rows } = await db.raw<{ rows: GenerationRow[] }>(
    `SELECT ${columns} FROM ${joined} WHERE u.workspace_id = ? ${byKey} ${cursor} ORDER BY u.occurred_at DESC, u.id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

export async function findGeneration(db: Db, scope: GenerationScope, generationId: string): Promise<GenerationRow | undefined> {
  const { rows } = await db.raw<{ rows: GenerationRow[] }>(
    `SELECT ${columns} FROM ${joined} WHERE u.generation_id = ? AND u.workspace_id = ? ${scope.keyId === undefined ? '' : 'AND u.key_id = ?'}`,
    scope.keyId === undefined ? [generationId, scope.workspaceId] : [generationId, scope.workspaceId, scope.keyId],
  );
  return rows[0];
}

export interface FeedbackRow {
  generationId: string;
  workspaceId: string;
  feedbackId: string;
  rating: number;
  tags: string[];
  ratedAt: Date;
}

/**
 * Stores the latest rating of each generation: a rating replaces the stored one unless the stored
 * one is newer (events of one batch arrive in stream order; `ratings` holds one per generation).
 */
export async function upsertFeedback(trx: Knex.Transaction, ratings: FeedbackRow[]): Promise<void> {
  if (ratings.length === 0) return;
  await trx.raw(
    `INSERT INTO generation_feedback (generation_id, workspace_id, feedback_id, rating, tags, rated_at)
     SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::smallint[], ?::jsonb[], ?::timestamptz[])
       AS r(generation_id, workspace_id, feedback_id, rating, tags, rated_at)
     ON CONFLICT (generation_id) DO UPDATE SET workspace_id = excluded.workspace_id, feedback_id = excluded.feedback_id,
       rating = excluded.rating, tags = excluded.tags, rated_at = excluded.rated_at, updated_at = now()
     WHERE generation_feedback.rated_at <= excluded.rated_at`,
    [
      ratings.map((r) => r.generationId),
      ratings.map((r) => r.workspaceId),
      ratings.map((r) => r.feedbackId),
      ratings.map((r) => r.rating),
      ratings.map((r) => JSON.stringify(r.tags)),
      ratings.map((r) => r.ratedAt.toISOString()),
    ],
  );
}
