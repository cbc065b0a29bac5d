import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Thumbs up and down per (tier, model): the evidence of the routing posterior.

export interface ScoreRow {
  tier: string;
  model: string;
  thumbs_up: number;
  thumbs_down: number;
}

/** Adds the deltas (a replaced rating takes its old vote back). */
export async function adjustScore(trx: Knex.Transaction, tier: string, model: string, up: number, down: number): Promise<void> {
  await trx.raw(
    `INSERT INTO routing_scores AS s (tier, model, thumbs_up, thumbs_down) VALUES (?, ?, GREATEST(?::bigint, 0), GREATEST(?::bigint, 0))
     ON CONFLICT (tier, model) DO UPDATE SET thumbs_up = GREATEST(s.thumbs_up + ?::bigint, 0), thumbs_down = GREATEST(s.thumbs_down + ?::bigint, 0), updated_at = now()`,
    [tier, model, up, down, up, down],
  );
}

export async function listScores(db: Db): Promise<ScoreRow[]> {
  const { rows } = await db.raw<{ rows: ScoreRow[] }>('SELECT tier, model, thumbs_up, thumbs_down FROM routing_scores');
  return rows;
}
