import type { Knex } from './db.js';
import type { Logger } from './log.js';
import { type DataKeyRing, decryptLegacySecret } from './secrets.js';

/** A column of a service's schema that holds ciphertexts of one purpose. */
export interface EncryptedColumn {
  table: string;
  /** The primary key column, to update exactly the row read. */
  keyColumn: string;
  column: string;
  purpose: string;
}

export interface RotationResult {
  table: string;
  column: string;
  reencrypted: number;
}

const batchSize = 200;

/**
 * Re-encrypts every ciphertext of `columns` that is not under the ring's current key: older keys
 * of the ring, and data of the format before data keys (v1, readable with `legacyMeshSecret`).
 * Batches run in their own transactions and lock their rows (FOR UPDATE), and each update only
 * applies if the value is still the one read, so it is safe beside a running service and can be
 * run again after an interruption (it resumes where it stopped). Never logs a secret.
 */
export async function rotateDataKey(input: {
  db: Knex;
  ring: DataKeyRing;
  columns: EncryptedColumn[];
  legacyMeshSecret?: string;
  log: Logger;
}): Promise<RotationResult[]> {
  const { db, ring, log } = input;
  const current = `v2.${ring.currentKeyId}.%`;
  const results: RotationResult[] = [];
  for (const { table, keyColumn, column, purpose } of input.columns) {
    let reencrypted = 0;
    for (;;) {
      const done = await db.transaction(async (trx) => {
        const rows: Array<{ key: string; sealed: string }> = (
          await trx.raw(`SELECT ?? AS key, ?? AS sealed FROM ?? WHERE ?? IS NOT NULL AND ?? NOT LIKE ? ORDER BY ?? LIMIT ? FOR UPDATE`, [
            keyColumn,
            column,
            table,
            column,
            column,
            current,
            keyColumn,
            batchSize,
          ])
        ).rows;
        for (const row of rows) {
          const plaintext = row.sealed.startsWith('v1.')
            ? decryptLegacy(row.sealed, purpose, input.legacyMeshSecret, `${table}.${column}`)
            : ring.decryptBytes(row.sealed, purpose);
          await trx(table)
            .where({ [keyColumn]: row.key, [column]: row.sealed })
            .update({ [column]: ring.encrypt(plaintext, purpose) });
        }
        reencrypted += rows.length;
        return rows.length < batchSize;
      });
      if (done) break;
    }
    log.info({ table, column, reencrypted, key_id: ring.currentKeyId }, 'data key rotation: column done');
    results.push({ table, column, reencrypted });
  }
  return results;
}

function decryptLegacy(sealed: string, purpose: string, meshSecret: string | undefined, where: string): Buffer {
  if (!meshSecret)
    throw new Error(`${where} holds data encrypted before data keys existed (v1): set SWITCHBOARD_MESH_SECRET to the secret it was written with`);
  return decryptLegacySecret(sealed, purpose, meshSecret);
}
