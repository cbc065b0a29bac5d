import { type Db, microsOf, type PageQuery, pageClause } from '@switchboard/runtime/sql';
import { type AttemptDeletion, attemptDeletionSql } from './auth-failures.js';

// Sessions and their rotating refresh tokens.

/**
 * Inserts a session and its first refresh token, in one statement, if the user is active and
 * (when `passwordHash` is given) still has that password hash; the user row is share-locked by
 * the statement, so a concurrent password change or deactivation either waits for it or wins
 * before it. False when no session was opened.
 */
export async function insertSessionForActiveUser(
  db: Db,
  input: {
    sessionId: string;
    userId: string;
    aal: string;
    openedAt: Date;
    expiresAt: Date;
    refreshTokenHash: string;
    passwordHash?: string;
    ip?: string;
    userAgent?: string;
  },
  alsoDelete?: AttemptDeletion,
): Promise<boolean> {
  // A sign-in's throttle rows go in the same statement: one round trip and one commit fewer on
  // the sign-in path, where each costs more than the rest of the request outside argon2. A
  // data-modifying CTE always runs, whether or not the session is opened.
  const deletion = alsoDelete && attemptDeletionSql(alsoDelete);
  const { rows } = (await db.raw(
    `WITH ${deletion ? `cleared AS (${deletion.sql}), ` : ''}active AS (
       SELECT id FROM users WHERE id = ? AND deactivated_at IS NULL AND (?::text IS NULL OR password_hash = ?) FOR SHARE
     ), opened AS (
       INSERT INTO sessions (id, user_id, aal, created_at, last_used_at, expires_at, ip, user_agent)
       SELECT ?, id, ?, ?, ?, ?, ?, ? FROM active RETURNING id
     )
     INSERT INTO refresh_tokens (token_hash, session_id, parent_hash) SELECT ?, id, NULL FROM opened RETURNING session_id`,
    [
      ...(deletion?.bindings ?? []),
      input.userId,
      input.passwordHash ?? null,
      input.passwordHash ?? null,
      input.sessionId,
      input.aal,
      input.openedAt,
      input.openedAt,
      input.expiresAt,
      input.ip ?? null,
      input.userAgent ?? null,
      input.refreshTokenHash,
    ],
  )) as { rows: unknown[] };
  return rows.length === 1;
}

export async function insertRefreshToken(db: Db, token: { tokenHash: string; sessionId: string; parentHash: string | null }): Promise<void> {
  await db('refresh_tokens').insert({ token_hash: token.tokenHash, session_id: token.sessionId, parent_hash: token.parentHash });
}

export interface SessionRow {
  id: string;
  user_id: string;
  aal: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

export interface RefreshTokenRow {
  token_hash: string;
  session_id: string;
  parent_hash: string | null;
  created_at: Date;
  used_at: Date | null;
  successor_hash: string | null;
  successor_nonce: string | null;
}

/** The refresh token and its session, both locked for the rotation. */
export async function lockRefreshToken(db: Db, tokenHash: string): Promise<{ token: RefreshTokenRow; session: SessionRow } | undefined> {
  const token = (await db('refresh_tokens').where({ token_hash: tokenHash }).forUpdate().first()) as RefreshTokenRow | undefined;
  if (!token) return undefined;
  const session = (await db('sessions').where({ id: token.session_id }).forUpdate().first()) as SessionRow;
  return { token, session };
}

/** The session of a refresh token, when that session is `userId`'s. */
export async function findUsersSessionOfRefreshToken(db: Db, tokenHash: string, userId: string): Promise<string | undefined> {
  const row = await db('refresh_tokens as t')
    .join('sessions as s', 's.id', 't.session_id')
    .where({ 't.token_hash': tokenHash, 's.user_id': userId })
    .first('s.id');
  return row?.id;
}

export async function findRefreshToken(db: Db, tokenHash: string): Promise<RefreshTokenRow | undefined> {
  return db('refresh_tokens').where({ token_hash: tokenHash }).first();
}

export async function markRefreshTokenUsed(db: Db, tokenHash: string, successor: { hash: string; nonce: string }, at: Date): Promise<void> {
  await db('refresh_tokens').where({ token_hash: tokenHash }).update({ used_at: at, successor_hash: successor.hash, successor_nonce: successor.nonce });
}

export async function touchSession(db: Db, sessionId: string, at: Date): Promise<void> {
  await db('sessions').where({ id: sessionId }).update({ last_used_at: at });
}

/** Revokes the user's live sessions that match; returns the ids actually revoked. */
export async function revokeUserSessions(db: Db, input: { userId: string; reason: string; at: Date; only?: string[]; except?: string }): Promise<string[]> {
  const query = db('sessions').where({ user_id: input.userId }).whereNull('revoked_at');
  if (input.only) query.whereIn('id', input.only);
  if (input.except) query.whereNot('id', input.except);
  const rows = (await query.update({ revoked_at: input.at, revoked_reason: input.reason }).returning(['id'])) as Array<{ id: string }>;
  return rows.map((row) => row.id);
}

export async function findRevokedSessions(db: Db, since: Date): Promise<Array<{ id: string; revoked_at: Date }>> {
  return db('sessions').select('id', 'revoked_at').where('revoked_at', '>=', since).orderBy('revoked_at');
}

export interface ActiveSessionRow {
  id: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date;
  ip: string | null;
  user_agent: string | null;
  cursor_micros: string;
}

/** The user's sessions live at `now` (not revoked, not past their end or idle limit), newest first. */
export async function listActiveSessions(db: Db, userId: string, live: { now: Date; idleMs: number }, page: PageQuery): Promise<ActiveSessionRow[]> {
  const { cursor, bindings } = pageClause(page, 'created_at', 'id', [userId, live.now, live.now, live.idleMs]);
  const result = await db.raw<{ rows: ActiveSessionRow[] }>(
    `SELECT id, created_at, last_used_at, expires_at, ip, user_agent, ${microsOf('created_at')} AS cursor_micros
       FROM sessions
      WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?
        AND last_used_at > ?::timestamptz - ?::bigint * interval '1 millisecond' ${cursor}
      ORDER BY created_at DESC, id DESC LIMIT ?`,
    bindings,
  );
  return result.rows;
}
