import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { SessionRevokedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { ListSessionsResponseSchema, SessionSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import type { AuditActor, AuditTrail } from '@switchboard/runtime/audit';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { newId, newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { decodeCursor, pageOf, parseLimit } from '@switchboard/runtime/pagination';
import { type DataKeyRing, sha256Hex } from '@switchboard/runtime/secrets';
import type { Db } from '@switchboard/runtime/sql';
import type { SigningKeys } from './signing-keys.js';
import type { AttemptDeletion } from './store/auth-failures.js';
import {
  findRefreshToken,
  findRevokedSessions,
  findUsersSessionOfRefreshToken,
  insertRefreshToken,
  insertSessionForActiveUser,
  listActiveSessions,
  lockRefreshToken,
  markRefreshTokenUsed,
  revokeUserSessions,
  type SessionRow,
  touchSession,
} from './store/sessions.js';
import { findUserById } from './store/users.js';
import type { EventWriter } from './workspaces.js';

/**
 * Sessions (docs/api/identity.md#sessions-and-refresh-tokens): a session row (`ses_…`, the `sid` of its access tokens) and an opaque
 * refresh token (256 bits) stored only as its SHA-256. Sessions end 30 days after sign-in and
 * after 7 days without a refresh. Every refresh rotates the token; reusing a rotated token
 * revokes the session, except the immediate parent reused within 10 s, which gets the same
 * successor (two tabs refreshing at once). Revocations emit `session.revoked`, from which the
 * gateway refuses the session's access tokens on the next request.
 */

export const sessionLifetimeMs = 30 * 24 * 3600 * 1000;
/** Refresh tokens not used for this long stop working (checked at refresh). */
export const sessionIdleTimeoutMs = 7 * 24 * 3600 * 1000;
/** A rotated token reused within this time, while its successor is unused, gets that successor. */
export const refreshGraceMs = 10_000;
/** How far back ListRevokedSessions looks by default: the access-token lifetime. */
export const revocationHorizonMs = 15 * 60 * 1000;
/**
 * A rotated token's successor is derived from it and a random nonce kept on its row (HMAC under
 * this purpose's key), so the grace can give it again while only hashes of refresh tokens are
 * stored; deriving it takes the parent token, the nonce and the key together.
 */
const successorPurpose = 'identity.refresh-successor';

export type SessionTokens = MessageInitShape<typeof SessionSchema>;

export type RevocationReason = 'logout' | 'password_change' | 'password_reset' | 'deactivation' | 'refresh_token_reuse';

export const invalidCredentials = () => apiError(Code.Unauthenticated, 'invalid_credentials', 'The email address or password is incorrect.');

export const invalidRefreshToken = () =>
  apiError(Code.Unauthenticated, 'invalid_token', 'The refresh token is not valid or its session has ended; sign in again.', { field: 'refresh_token' });

export type LogoutScope = 'local' | 'others' | 'global';

/** Where a sign-in came from (the gateway's view of the client), kept on the session it opens. */
export interface SessionOrigin {
  ip?: string;
  userAgent?: string;
}

export interface OpenOptions {
  aal?: 'aal1' | 'aal2';
  /** The password hash the caller checked: no session when it changed meanwhile. */
  checkedPasswordHash?: string;
  /** A sign-in's throttle rows, deleted by the same statement. */
  attemptsToDelete?: AttemptDeletion;
  origin?: SessionOrigin;
}

export const sessionNotFound = () => apiError(Code.NotFound, 'session_not_found', 'No such active session of yours.');

export interface SessionsDeps {
  db: Knex;
  signingKeys: SigningKeys;
  dataKeys: DataKeyRing;
  recordEvent?: EventWriter;
  log?: Logger;
  clock?: Clock;
  /** Writes `session.revoked` records (docs/api/audit.md); a test's Sessions may go without. */
  audit?: AuditTrail;
}

export class Sessions {
  constructor(private readonly deps: SessionsDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /**
   * The successor of a rotated token. The nonce names the data key it was derived with
   * (`<key id>.<random>`), so the grace gives the same successor after a key rotation.
   */
  private successorOf(refreshToken: string, nonce: string): string {
    const dot = nonce.indexOf('.');
    const keyId = dot > 0 ? nonce.slice(0, dot) : undefined;
    return this.deps.dataKeys.derive(`${refreshToken}.${nonce}`, successorPurpose, keyId);
  }

  /**
   * Opens a session for `userId` (in `db`: the pool, or the caller's transaction) and returns
   * its tokens. The access token is signed first, so a signing failure leaves nothing behind;
   * then one statement share-locks the user row and inserts the session and its refresh token
   * only if the user is active and, when the caller checked a password, still has that hash
   * (a password changed meanwhile gives no session: 401 invalid_credentials). A sign-in passes
   * its throttle's `successDeletion`, deleted by the same statement whatever its outcome.
   */
  async open(db: Db, userId: string, options: OpenOptions = {}): Promise<SessionTokens> {
    const { aal = 'aal1', checkedPasswordHash, attemptsToDelete, origin } = options;
    const sessionId = newId('ses');
    const refreshToken = newToken();
    const now = this.now();
    const access = await this.deps.signingKeys.signAccessToken({ userId, sessionId, aal });
    const opened = await insertSessionForActiveUser(
      db,
      {
        sessionId,
        userId,
        aal,
        // The module's clock, like every later check of the session's age.
        openedAt: now,
        expiresAt: new Date(now.getTime() + sessionLifetimeMs),
        refreshTokenHash: sha256Hex(refreshToken),
        passwordHash: checkedPasswordHash,
        ip: origin?.ip,
        userAgent: origin?.userAgent,
      },
      attemptsToDelete,
    );
    if (!opened) throw invalidCredentials();
    return { accessToken: access.token, refreshToken, tokenType: 'Bearer', expiresIn: access.expiresIn };
  }

  /** Rotates a refresh token (docs/api/identity.md#sessions-and-refresh-tokens); 401 invalid_token for anything but a live token. */
  async refresh(refreshToken: string, requestId?: string): Promise<SessionTokens> {
    const tokenHash = sha256Hex(refreshToken);
    const outcome = await this.deps.db.transaction(async (trx) => {
      const found = await lockRefreshToken(trx, tokenHash);
      if (!found) return { kind: 'invalid' as const };
      const { token, session } = found;
      const now = this.now();
      if (session.revoked_at !== null || !isLive(session, now)) return { kind: 'invalid' as const };
      if (token.used_at === null) {
        const nonce = `${this.deps.dataKeys.currentKeyId}.${newToken()}`;
        const next = this.successorOf(refreshToken, nonce);
        const nextHash = sha256Hex(next);
        await insertRefreshToken(trx, { tokenHash: nextHash, sessionId: session.id, parentHash: tokenHash });
        await markRefreshTokenUsed(trx, tokenHash, { hash: nextHash, nonce }, now);
        await touchSession(trx, session.id, now);
        return { kind: 'ok' as const, refreshToken: next, session };
      }
      // A used token again: the concurrent-tab grace, or a stolen token being replayed.
      if (token.successor_hash && token.successor_nonce && now.getTime() - token.used_at.getTime() <= refreshGraceMs) {
        const successor = await findRefreshToken(trx, token.successor_hash);
        if (successor && successor.used_at === null)
          return { kind: 'ok' as const, refreshToken: this.successorOf(refreshToken, token.successor_nonce), session };
      }
      await this.revoke(trx, {
        userId: session.user_id,
        only: [session.id],
        reason: 'refresh_token_reuse',
        requestId,
        actor: { type: 'system', id: '' },
      });
      return { kind: 'reused' as const, session };
    });
    if (outcome.kind === 'invalid') throw invalidRefreshToken();
    if (outcome.kind === 'reused') {
      this.deps.log?.warn({ user_id: outcome.session.user_id, session_id: outcome.session.id, request_id: requestId }, 'refresh token reused: session revoked');
      throw invalidRefreshToken();
    }
    const { session } = outcome;
    const access = await this.deps.signingKeys.signAccessToken({ userId: session.user_id, sessionId: session.id, aal: session.aal });
    return { accessToken: access.token, refreshToken: outcome.refreshToken, tokenType: 'Bearer', expiresIn: access.expiresIn };
  }

  /**
   * Revokes the user's live sessions (all, `only` these, or all `except` one) in `trx` and
   * writes `session.revoked`, and one audit record of the action (`actor`: default the user,
   * with `ip`, in their personal workspace); returns the revoked ids.
   */
  async revoke(
    trx: Knex.Transaction,
    input: { userId: string; reason: RevocationReason; only?: string[]; except?: string; requestId?: string; ip?: string; actor?: AuditActor },
  ): Promise<string[]> {
    const ids = await revokeUserSessions(trx, { userId: input.userId, reason: input.reason, at: this.now(), only: input.only, except: input.except });
    if (ids.length > 0) {
      if (!this.deps.recordEvent) throw new Error('Sessions needs recordEvent to revoke');
      await this.deps.recordEvent(trx, SessionRevokedSchema, {
        data: { userId: input.userId, sessionIds: ids, reason: input.reason },
        requestId: input.requestId,
      });
      if (this.deps.audit) {
        const user = await findUserById(trx, input.userId);
        await this.deps.audit.record(trx, {
          action: 'session.revoked',
          outcome: 'success',
          actor: input.actor ?? { type: 'user', id: input.userId, ip: input.ip },
          // One session: that session; several: the user whose sessions they were.
          target: ids.length === 1 ? { type: 'session', id: ids[0] } : { type: 'user', id: input.userId },
          workspaceId: user?.personal_workspace_id ?? '',
          requestId: input.requestId,
          subjectUserId: input.userId,
          metadata: { reason: input.reason, sessions: ids.length },
        });
      }
    }
    return ids;
  }

  /**
   * Ends the caller's session (`local`: the session of the access token, or of `refreshToken`
   * when that one is the user's: another user's token is ignored), every other one (`others`),
   * or all of them (`global`); returns the revoked ids.
   */
  async logout(input: { userId: string; sessionId?: string; scope: LogoutScope; refreshToken?: string; requestId?: string; ip?: string }): Promise<string[]> {
    const { userId, sessionId, scope, requestId, ip } = input;
    let target = sessionId;
    if (scope === 'local' && input.refreshToken) {
      const owned = await findUsersSessionOfRefreshToken(this.deps.db, sha256Hex(input.refreshToken), userId);
      if (owned) target = owned;
    }
    return this.deps.db.transaction((trx) => {
      if (scope === 'global') return this.revoke(trx, { userId, reason: 'logout', requestId, ip });
      if (scope === 'others') return this.revoke(trx, { userId, reason: 'logout', except: sessionId, requestId, ip });
      return target ? this.revoke(trx, { userId, reason: 'logout', only: [target], requestId, ip }) : Promise.resolve([]);
    });
  }

  /**
   * The user's active sessions, newest first, a page at a time (docs/api/identity.md#signed-in-sessions);
   * `currentSessionId` (the caller's) is marked.
   */
  async list(
    userId: string,
    currentSessionId: string | undefined,
    input: { limit?: number; after?: string },
  ): Promise<MessageInitShape<typeof ListSessionsResponseSchema>> {
    const limit = parseLimit(input.limit);
    const after = decodeCursor(input.after);
    const rows = await listActiveSessions(this.deps.db, userId, { now: this.now(), idleMs: sessionIdleTimeoutMs }, { limit, after });
    const page = pageOf(rows, limit, (row) => ({ micros: row.cursor_micros, id: row.id }));
    return {
      data: page.rows.map((row) => ({
        sessionId: row.id,
        createdAt: timestampFromDate(row.created_at),
        lastUsedAt: timestampFromDate(row.last_used_at),
        expiresAt: timestampFromDate(row.expires_at),
        ip: row.ip ?? undefined,
        userAgent: row.user_agent ?? undefined,
        current: row.id === currentSessionId,
      })),
      hasMore: page.hasMore,
      nextCursor: page.nextCursor,
    };
  }

  /**
   * Signs out one session of the user ("sign out this one"), as a logout does: `session.revoked`
   * goes out and the gateway refuses its access tokens from the next request. Another user's
   * session, or one revoked already, is 404 session_not_found; returns the revoked ids.
   */
  async revokeOne(userId: string, sessionId: string, scope: { requestId?: string; ip?: string }): Promise<string[]> {
    const revoked = await this.deps.db.transaction((trx) => this.revoke(trx, { userId, reason: 'logout', only: [sessionId], ...scope }));
    if (revoked.length === 0) throw sessionNotFound();
    return revoked;
  }

  /** Sessions revoked since `since` (default: the access-token lifetime back). */
  revokedSince(since?: Date): Promise<Array<{ id: string; revoked_at: Date }>> {
    return findRevokedSessions(this.deps.db, since ?? new Date(this.now().getTime() - revocationHorizonMs));
  }
}

function isLive(session: SessionRow, now: Date): boolean {
  return session.expires_at.getTime() > now.getTime() && session.last_used_at.getTime() + sessionIdleTimeoutMs > now.getTime();
}
