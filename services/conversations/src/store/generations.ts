import type { Knex } from '@switchboard/runtime/db';
import type { Db } from '@switchboard/runtime/sql';

// The generations feedback may rate, kept from billing's events (and from billing itself on a miss).

export interface GenerationRow {
  generation_id: string;
  workspace_id: string;
  tier: string;
  model: string;
}

export async function rememberGeneration(db: Db, row: GenerationRow & { occurredAt: Date }): Promise<void> {
  await rememberGenerations(db, [row]);
}

/** Many at once, in one statement (a batch of billing's events); one already known stays as it is. */
export async function rememberGenerations(db: Db, rows: Array<GenerationRow & { occurredAt: Date }>): Promise<void> {
  if (rows.length === 0) return;
  await db('generations')
    .insert(
      rows.map((row) => ({ generation_id: row.generation_id, workspace_id: row.workspace_id, tier: row.tier, model: row.model, occurred_at: row.occurredAt })),
    )
    .onConflict('generation_id')
    .ignore();
}

/** Locks the generation for a rating (serializes ratings of one generation). */
export async function lockGeneration(trx: Knex.Transaction, generationId: string): Promise<GenerationRow | undefined> {
  return trx('generations').where({ generation_id: generationId }).forUpdate().first('generation_id', 'workspace_id', 'tier', 'model');
}

export async function findGeneration(db: Db, generationId: string): Promise<GenerationRow | undefined> {
  return db('generations').where({ generation_id: generationId }).first('generation_id', 'workspace_id', 'tier', 'model');
}
