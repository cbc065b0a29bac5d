import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Top-up payments: one row per (workspace, idempotency key).

export interface CheckoutRow {
  id: string;
  workspace_id: string;
  idempotency_key: string;
  amount_usd: string;
  provider: 'sandbox' | 'stripe';
  /** pending past expires_at reads as expired. */
  status: 'pending' | 'completed' | 'expired' | 'failed';
  checkout_url: string | null;
  token_key_id: string | null;
  provider_session_id: string | null;
  created_at: Date;
  expires_at: Date;
  completed_at: Date | null;
  /** The user who started it (none for one started without a user). */
  created_by: string | null;
  cursor_micros: string;
}

const columns = `id, workspace_id, idempotency_key, amount_usd::text AS amount_usd, provider,
  CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired' ELSE status END AS status,
  checkout_url, token_key_id, provider_session_id, created_at, expires_at, completed_at, created_by, ${microsOf('created_at')} AS cursor_micros`;

/**
 * Inserts the checkout unless the workspace used the idempotency key before; true when inserted.
 * A concurrent insert of the same key waits here until the first transaction ends (the unique
 * index), so a retry never sees a half-made checkout.
 */
export async function insertCheckout(
  trx: Knex.Transaction,
  checkout: { id: string; workspaceId: string; idempotencyKey: string; amountUsd: string; provider: string; expiresAt: Date; createdBy: string | null },
): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    `INSERT INTO checkouts (id, workspace_id, idempotency_key, amount_usd, provider, expires_at, created_by)
     VALUES (?, ?, ?, ?::numeric, ?, ?, ?) ON CONFLICT ON CONSTRAINT checkouts_idempotency_key DO NOTHING RETURNING id`,
    [checkout.id, checkout.workspaceId, checkout.idempotencyKey, checkout.amountUsd, checkout.provider, checkout.expiresAt, checkout.createdBy],
  );
  return rows.length === 1;
}

export async function setProviderDetails(
  trx: Knex.Transaction,
  id: string,
  details: { checkoutUrl?: string; providerSessionId?: string; tokenHash?: string; tokenKeyId?: string },
): Promise<void> {
  await trx('checkouts')
    .where({ id })
    .update({
      checkout_url: details.checkoutUrl ?? null,
      provider_session_id: details.providerSessionId ?? null,
      token_hash: details.tokenHash ?? null,
      token_key_id: details.tokenKeyId ?? null,
    });
}

export async function findCheckoutByKey(db: Db, workspaceId: string, idempotencyKey: string): Promise<CheckoutRow | undefined> {
  const { rows } = await db.raw<{ rows: CheckoutRow[] }>(`SELECT ${columns} FROM checkouts WHERE workspace_id = ? AND idempotency_key = ?`, [
    workspaceId,
    idempotencyKey,
  ]);
  return rows[0];
}

/** The checkout of a sandbox token's hash, read without a lock (the payment page). */
export async function findCheckoutByTokenHash(db: Db, tokenHash: string): Promise<CheckoutRow | undefined> {
  const { rows } = await db.raw<{ rows: CheckoutRow[] }>(`SELECT ${columns} FROM checkouts WHERE token_hash = ?`, [tokenHash]);
  return rows[0];
}

/** Locks the checkout a provider reference names (a sandbox token's hash, or a Stripe session id). */
export async function lockCheckout(trx: Knex.Transaction, by: { tokenHash: string } | { providerSessionId: string }): Promise<CheckoutRow | undefined> {
  const [column, value] = 'tokenHash' in by ? ['token_hash', by.tokenHash] : ['provider_session_id', by.providerSessionId];
  const { rows } = await trx.raw<{ rows: CheckoutRow[] }>(`SELECT ${columns} FROM checkouts WHERE ${column} = ? FOR UPDATE`, [value]);
  return rows[0];
}

export async function markCompleted(trx: Knex.Transaction, id: string): Promise<Date> {
  const [row] = (await trx('checkouts').where({ id }).update({ status: 'completed', completed_at: trx.fn.now() }).returning(['completed_at'])) as Array<{
    completed_at: Date;
  }>;
  return row.completed_at;
}

export async function listCheckouts(db: Db, workspaceId: string, page: PageQuery): Promise<CheckoutRow[]> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [workspaceId]);
  const { rows } = await db.raw<{ rows: CheckoutRow[] }>(
    `SELECT ${columns} FROM checkouts WHERE workspace_id = ? ${cursor} ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

/** Records a provider event as applied; false when it was applied before (a replay). */
export async function recordProviderEvent(trx: Knex.Transaction, provider: string, eventId: string): Promise<boolean> {
  const { rows } = await trx.raw<{ rows: unknown[] }>(
    'INSERT INTO provider_events (provider, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING event_id',
    [provider, eventId],
  );
  return rows.length === 1;
}
