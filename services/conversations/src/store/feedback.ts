import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// Feedback: one rating per (workspace, generation), replaced by a new one.

export interface FeedbackRow {
  id: string;
  generation_id: string;
  rating: number;
  comment: string | null;
  tags: string[];
  tier: string;
  model: string;
  created_at: Date;
  updated_at: Date;
}

const columns = 'id, generation_id, rating, comment, tags, tier, model, created_at, updated_at';

export async function findFeedback(trx: Knex.Transaction, workspaceId: string, generationId: string): Promise<FeedbackRow | undefined> {
  return trx('feedback').where({ workspace_id: workspaceId, generation_id: generationId }).first(trx.raw(columns));
}

export async function insertFeedback(
  trx: Knex.Transaction,
  row: { id: string; workspaceId: string; generationId: string; rating: number; comment: string | null; tags: string[]; tier: string; model: string },
): Promise<FeedbackRow> {
  const { rows } = await trx.raw<{ rows: FeedbackRow[] }>(
    `INSERT INTO feedback (id, workspace_id, generation_id, rating, comment, tags, tier, model) VALUES (?, ?, ?, ?, ?, ?::text[], ?, ?) RETURNING ${columns}`,
    [row.id, row.workspaceId, row.generationId, row.rating, row.comment, row.tags, row.tier, row.model],
  );
  return rows[0];
}

export async function replaceFeedback(
  trx: Knex.Transaction,
  id: string,
  row: { rating: number; comment: string | null; tags: string[] },
): Promise<FeedbackRow> {
  const { rows } = await trx.raw<{ rows: FeedbackRow[] }>(
    `UPDATE feedback SET rating = ?, comment = ?, tags = ?::text[], updated_at = now() WHERE id = ? RETURNING ${columns}`,
    [row.rating, row.comment, row.tags, id],
  );
  return rows[0];
}

export interface SummaryRows {
  totals: { total: number; thumbs_up: number; thumbs_down: number };
  byTag: Array<{ key: string; total: number; thumbs_up: number; thumbs_down: number }>;
  byModel: Array<{ key: string; total: number; thumbs_up: number; thumbs_down: number }>;
}

const counts = `count(*)::int AS total, count(*) FILTER (WHERE rating = 1)::int AS thumbs_up, count(*) FILTER (WHERE rating = -1)::int AS thumbs_down`;

/** The workspace's current ratings given or changed since `since`, counted. */
export async function summarize(db: Db, workspaceId: string, since: Date): Promise<SummaryRows> {
  const scope = 'FROM feedback WHERE workspace_id = ? AND updated_at >= ?';
  const [totals, byTag, byModel] = await Promise.all([
    db.raw<{ rows: SummaryRows['totals'][] }>(`SELECT ${counts} ${scope}`, [workspaceId, since]),
    db.raw<{ rows: SummaryRows['byTag'] }>(
      `SELECT tag AS key, ${counts} ${scope.replace('FROM feedback', 'FROM feedback, unnest(tags) AS tag')} GROUP BY tag ORDER BY tag`,
      [workspaceId, since],
    ),
    db.raw<{ rows: SummaryRows['byModel'] }>(`SELECT model AS key, ${counts} ${scope} GROUP BY model ORDER BY model`, [workspaceId, since]),
  ]);
  return { totals: totals.rows[0], byTag: byTag.rows, byModel: byModel.rows };
}
