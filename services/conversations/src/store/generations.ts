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
  await db.raw(
    'INSERT INTO generations (generation_id, workspace_id, tier, model, occurred_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (generation_id) DO NOTHING',
    [row.generation_id, row.workspace_id, row.tier, row.model, row.occurredAt],
  );
}

/** Locks the generation for a rating (serializes ratings of one generation). */
export async function lockGeneration(trx: Knex.Transaction, generationId: string): Promise<GenerationRow | undefined> {
  return trx('generations').where({ generation_id: generationId }).forUpdate().first('generation_id', 'workspace_id', 'tier', 'model');
}

export async function findGeneration(db: Db, generationId: string): Promise<GenerationRow | undefined> {
  return db('generations').where({ generation_id: generationId }).first('generation_id', 'workspace_id', 'tier', 'model');
}
