import { Code } from '@connectrpc/connect';
import type { AuditTrail } from '@switchboard/runtime/audit';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { CallScope } from '@switchboard/runtime/server';
import type { LoginThrottle } from './login-throttle.js';
import type { AccountMail } from './notifications.js';
import { assertAcceptablePassword, type PasswordHasher } from './passwords.js';
import type { Sessions } from './sessions.js';
import { countRecentPasswordResets, findPasswordReset, insertPasswordReset, usePasswordResets } from './store/password-resets.js';
import { findUserByEmail, findUserById, lockUser, setPasswordHash } from './store/users.js';

/**
 * Password reset (docs/api/identity.md#password-reset-and-email-verification): the request always answers 202 at once and does its work after
 * answering (so neither the status nor the timing tells whether the address has an account);
 * a registered, active address gets a single-use token (256 bits, stored as SHA-256) valid for
 * 1 hour (PASSWORD_RESET_TTL). Confirming sets the password, uses every outstanding reset token
 * of the account and revokes all its sessions. Two-factor authentication stays on.
 */

export const defaultResetTtlMs = 60 * 60 * 1000;
/** At most this many reset mails per account within the window. */
const maxResetMailsPerWindow = 3;
const resetMailWindowSeconds = 15 * 60;

export const invalidResetToken = () =>
  apiError(Code.InvalidArgument, 'invalid_token', 'The reset token is not valid, was used already or has expired; ask for a new one.', { field: 'token' });

export interface PasswordResetsDeps {
  db: Knex;
  log: Logger;
  passwords: PasswordHasher;
  sessions: Sessions;
  mail: AccountMail;
  throttle: LoginThrottle;
  clock?: Clock;
  ttlMs?: number;
  audit: AuditTrail;
}

export class PasswordResets {
  constructor(private readonly deps: PasswordResetsDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  private get ttlMs(): number {
    return this.deps.ttlMs ?? defaultResetTtlMs;
  }

  /** Answers at once; the token and the mail follow in the background. */
  request(email: string, requestId?: string): void {
    this.issue(email).catch((err) => this.deps.log.error({ request_id: requestId, err: (err as Error).message }, 'password reset request failed'));
  }

  private async issue(email: string): Promise<void> {
    const user = await findUserByEmail(this.deps.db, email);
    if (!user || user.deactivated_at !== null) return;
    const token = newToken();
    // Nobody gets mail-bombed: past a few mails in a quarter of an hour, requests are dropped
    // (still 202). The user row is locked while counting, so concurrent requests cannot all
    // see room under the cap.
    const issued = await this.deps.db.transaction(async (trx) => {
      await lockUser(trx, user.id);
      if ((await countRecentPasswordResets(trx, user.id, resetMailWindowSeconds)) >= maxResetMailsPerWindow) return false;
      await insertPasswordReset(trx, { tokenHash: sha256Hex(token), userId: user.id, expiresAt: new Date(this.now().getTime() + this.ttlMs) });
      return true;
    });
    if (!issued) {
      this.deps.log.warn({ user_id: user.id }, 'password reset mails throttled');
      return;
    }
    await this.deps.mail.passwordReset({ id: user.id, email: user.email, fullName: user.full_name }, token, Math.round(this.ttlMs / 60_000));
  }

  /** Sets the new password; returns the ids of the sessions it revoked. */
  async confirm(token: string, newPassword: string, scope: CallScope): Promise<string[]> {
    const { requestId } = scope;
    const { db, passwords, sessions, mail, throttle } = this.deps;
    const tokenHash = sha256Hex(token);
    const reset = await findPasswordReset(db, tokenHash);
    if (!reset || !this.usable(reset)) throw invalidResetToken();
    const user = await findUserById(db, reset.user_id);
    if (!user || user.deactivated_at !== null) throw invalidResetToken();
    assertAcceptablePassword(newPassword, user.email, 'new_password');
    const passwordHash = await passwords.hash(newPassword, scope.signal);
    const revoked = await db.transaction(async (trx) => {
      const locked = await findPasswordReset(trx, tokenHash, true);
      if (!locked || !this.usable(locked)) return undefined;
      await setPasswordHash(trx, user.id, passwordHash);
      await usePasswordResets(trx, user.id, this.now());
      const ids = await sessions.revoke(trx, { userId: user.id, reason: 'password_reset', requestId, ip: scope.ip });
      await this.deps.audit.record(trx, {
        action: 'user.password_reset',
        outcome: 'success',
        actor: { type: 'user', id: user.id, ip: scope.ip },
        target: { type: 'user', id: user.id },
        workspaceId: user.personal_workspace_id,
        requestId,
        subjectUserId: user.id,
        metadata: { sessions_revoked: ids.length },
      });
      return ids;
    });
    if (!revoked) throw invalidResetToken();
    // The mailbox is proven: earlier wrong guesses no longer block the owner.
    await throttle.clearAccount('password', user.email);
    await mail.credentialChanged({ id: user.id, email: user.email, fullName: user.full_name }, 'password_reset');
    return revoked;
  }

  private usable(reset: { used_at: Date | null; expires_at: Date }): boolean {
    return reset.used_at === null && reset.expires_at.getTime() > this.now().getTime();
  }
}
