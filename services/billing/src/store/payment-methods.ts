import type { Knex } from '@switchboard/runtime/db';
import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';

// Saved payment methods, the setups that save them, and the Stripe Customer of each workspace.

export interface SetupRow {
  id: string;
  workspace_id: string;
  provider: 'sandbox' | 'stripe';
  /** pending past expires_at reads as expired. */
  status: 'pending' | 'completed' | 'expired';
  setup_url: string | null;
  token_key_id: string | null;
  provider_session_id: string | null;
  payment_method_id: string | null;
  created_by: string | null;
  created_at: Date;
  expires_at: Date;
  completed_at: Date | null;
}

export interface PaymentMethodRow {
  id: string;
  workspace_id: string;
  provider: 'sandbox' | 'stripe';
  provider_method_id: string;
  provider_customer_id: string | null;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  created_at: Date;
}

const setupColumns = `id, workspace_id, provider,
  CASE WHEN status = 'pending' AND expires_at <= now() THEN 'expired' ELSE status END AS status,
  setup_url, token_key_id, provider_session_id, payment_method_id, created_by, created_at, expires_at, completed_at`;

const methodColumns = 'id, workspace_id, provider, provider_method_id, provider_customer_id, brand, last4, exp_month, exp_year, created_at';

export async function findCustomer(db: Db, workspaceId: string, provider: string): Promise<string | undefined> {
  const row = await db('provider_customers').where({ workspace_id: workspaceId, provider }).first('customer_id');
  return row?.customer_id;
}

/** Keeps the first customer stored for the workspace; returns the one stored. */
export async function insertCustomer(db: Db, workspaceId: string, provider: string, customerId: string): Promise<string> {
  await db.raw('INSERT INTO provider_customers (workspace_id, provider, customer_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [
    workspaceId,
    provider,
    customerId,
  ]);
  const stored = await findCustomer(db, workspaceId, provider);
  if (!stored) throw new Error(`the ${provider} customer of ${workspaceId} vanished`);
  return stored;
}

export async function insertSetup(
  trx: Knex.Transaction,
  setup: { id: string; workspaceId: string; provider: string; expiresAt: Date; createdBy: string | null },
): Promise<void> {
  await trx('payment_method_setups').insert({
    id: setup.id,
    workspace_id: setup.workspaceId,
    provider: setup.provider,
    expires_at: setup.expiresAt,
    created_by: setup.createdBy,
  });
}

export async function setSetupDetails(
  trx: Knex.Transaction,
  id: string,
  details: { setupUrl?: string; providerSessionId?: string; tokenHash?: string; tokenKeyId?: string },
): Promise<void> {
  await trx('payment_method_setups')
    .where({ id })
    .update({
      setup_url: details.setupUrl ?? null,
      provider_session_id: details.providerSessionId ?? null,
      token_hash: details.tokenHash ?? null,
      token_key_id: details.tokenKeyId ?? null,
    });
}

export async function findSetup(db: Db, by: { id: string } | { tokenHash: string } | { providerSessionId: string }): Promise<SetupRow | undefined> {
  const [column, value] = 'id' in by ? ['id', by.id] : 'tokenHash' in by ? ['token_hash', by.tokenHash] : ['provider_session_id', by.providerSessionId];
  const { rows } = await db.raw<{ rows: SetupRow[] }>(`SELECT ${setupColumns} FROM payment_method_setups WHERE ${column} = ?`, [value]);
  return rows[0];
}

/** Locks the setup a provider reference names (a sandbox token's hash, or a Stripe session id). */
export async function lockSetup(trx: Knex.Transaction, by: { tokenHash: string } | { providerSessionId: string }): Promise<SetupRow | undefined> {
  const [column, value] = 'tokenHash' in by ? ['token_hash', by.tokenHash] : ['provider_session_id', by.providerSessionId];
  const { rows } = await trx.raw<{ rows: SetupRow[] }>(`SELECT ${setupColumns} FROM payment_method_setups WHERE ${column} = ? FOR UPDATE`, [value]);
  return rows[0];
}

export async function markSetupCompleted(trx: Knex.Transaction, id: string, paymentMethodId: string): Promise<void> {
  await trx('payment_method_setups').where({ id }).update({ status: 'completed', payment_method_id: paymentMethodId, completed_at: trx.fn.now() });
}

export async function insertPaymentMethod(
  trx: Knex.Transaction,
  method: Omit<PaymentMethodRow, 'created_at'> & { setup_id: string | null; created_by: string | null },
): Promise<PaymentMethodRow> {
  const { rows } = await trx.raw<{ rows: PaymentMethodRow[] }>(
    `INSERT INTO payment_methods (id, workspace_id, provider, provider_method_id, provider_customer_id, brand, last4, exp_month, exp_year, setup_id, created_by)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${methodColumns}`,
    [
      method.id,
      method.workspace_id,
      method.provider,
      method.provider_method_id,
      method.provider_customer_id,
      method.brand,
      method.last4,
      method.exp_month,
      method.exp_year,
      method.setup_id,
      method.created_by,
    ],
  );
  return rows[0];
}

export async function findPaymentMethod(db: Db, workspaceId: string, id: string): Promise<PaymentMethodRow | undefined> {
  const { rows } = await db.raw<{ rows: PaymentMethodRow[] }>(`SELECT ${methodColumns} FROM payment_methods WHERE workspace_id = ? AND id = ?`, [
    workspaceId,
    id,
  ]);
  return rows[0];
}

/** A page of the workspace's methods, newest first (`limit + 1` rows: see pageOf). */
export async function listPaymentMethods(db: Db, workspaceId: string, page: PageQuery): Promise<Array<PaymentMethodRow & { cursor_micros: string }>> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [workspaceId]);
  const { rows } = await db.raw<{ rows: Array<PaymentMethodRow & { cursor_micros: string }> }>(
    `SELECT ${methodColumns}, ${microsOf('created_at')} AS cursor_micros FROM payment_methods WHERE workspace_id = ? ${cursor}
     ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return rows;
}

/** The workspace's newest method saved with `provider`: the default, the one auto top-up charges. */
export async function newestPaymentMethod(db: Db, workspaceId: string, provider: string): Promise<PaymentMethodRow | undefined> {
  const { rows } = await db.raw<{ rows: PaymentMethodRow[] }>(
    `SELECT ${methodColumns} FROM payment_methods WHERE workspace_id = ? AND provider = ? ORDER BY created_at DESC, id DESC LIMIT 1`,
    [workspaceId, provider],
  );
  return rows[0];
}

/**
 * Locks the workspace's methods, deletes one, and returns how many are left: two concurrent
 * removals are serialized, so exactly one of them sees the last one go.
 */
export async function deletePaymentMethod(trx: Knex.Transaction, workspaceId: string, id: string): Promise<{ deleted: boolean; left: number }> {
  const { rows } = await trx.raw<{ rows: Array<{ id: string }> }>('SELECT id FROM payment_methods WHERE workspace_id = ? ORDER BY id FOR UPDATE', [
    workspaceId,
  ]);
  const deleted = (await trx('payment_methods').where({ workspace_id: workspaceId, id }).delete()) === 1;
  return { deleted, left: rows.filter((row) => row.id !== id).length };
}
