import { audit } from '@switchboard/runtime/audit';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument, unprocessable } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import type { CallScope } from '@switchboard/runtime/server';
import { normalizeFullName } from './accounts.js';
import type { AccountMail, MailRecipient } from './notifications.js';
import { assertAcceptablePassword, type PasswordHasher } from './passwords.js';
import type { Reauthentication } from './reauthentication.js';
import type { Sessions } from './sessions.js';
import { usePasswordResets } from './store/password-resets.js';
import { setPasswordHash, type UserRow, updateFullName } from './store/users.js';
import type { TwoFactor } from './two-factor.js';

/**
 * What a signed-in user changes about their own account: the profile, the password (other
 * sessions are revoked) and two-factor authentication. Every credential change mails a notice.
 */

export interface AccountSettingsDeps {
  db: Knex;
  log: Logger;
  passwords: PasswordHasher;
  sessions: Sessions;
  twoFactor: TwoFactor;
  reauth: Reauthentication;
  mail: AccountMail;
}

const recipient = (user: UserRow): MailRecipient => ({ id: user.id, email: user.email, fullName: user.full_name });

export class AccountSettings {
  constructor(private readonly deps: AccountSettingsDeps) {}

  async updateProfile(user: UserRow, fullName: string | undefined): Promise<UserRow> {
    if (fullName === undefined) throw invalidArgument('full_name', 'full_name is required (1 to 200 characters).');
    const name = normalizeFullName(fullName)!;
    return (await updateFullName(this.deps.db, user.id, name)) ?? user;
  }

  /** Returns the ids of the revoked sessions (every session but `currentSessionId`). */
  async changePassword(user: UserRow, input: { currentPassword: string; newPassword: string; currentSessionId?: string }, scope: CallScope): Promise<string[]> {
    const { requestId } = scope;
    const { db, passwords, sessions, reauth, mail, log } = this.deps;
    if (input.currentPassword === '') throw invalidArgument('current_password', 'current_password is required.');
    assertAcceptablePassword(input.newPassword, user.email, 'new_password');
    await reauth.password(user, input.currentPassword, scope, 'current_password');
    const passwordHash = await passwords.hash(input.newPassword, scope.signal);
    const revoked = await db.transaction(async (trx) => {
      await setPasswordHash(trx, user.id, passwordHash);
      // A reset mailed before the change must not undo it (docs/api/identity.md#password-reset-and-email-verification): outstanding tokens die.
      await usePasswordResets(trx, user.id, new Date());
      return sessions.revoke(trx, { userId: user.id, reason: 'password_change', except: input.currentSessionId, requestId });
    });
    audit(log, {
      event: 'credentials.password_changed',
      outcome: 'success',
      userId: user.id,
      ip: scope.ip,
      requestId,
      details: { sessions_revoked: revoked.length },
    });
    await mail.credentialChanged(recipient(user), 'password_changed');
    return revoked;
  }

  /** A pending secret, after the password is checked again (ASVS 7.5.1). */
  async enrollTwoFactor(user: UserRow, password: string, scope: CallScope) {
    await this.deps.reauth.password(user, password, scope);
    return this.deps.twoFactor.enroll(user);
  }

  async activateTwoFactor(user: UserRow, code: string, scope: CallScope): Promise<string[]> {
    const codes = await this.deps.twoFactor.activate(user, code);
    audit(this.deps.log, { event: 'credentials.two_factor_enabled', outcome: 'success', userId: user.id, ip: scope.ip, requestId: scope.requestId });
    await this.deps.mail.credentialChanged(recipient(user), 'two_factor_enabled');
    return codes;
  }

  /** Needs a current code or the password (docs/api/identity.md#two-factor-authentication). */
  async disableTwoFactor(user: UserRow, input: { code?: string; password?: string }, scope: CallScope): Promise<void> {
    const { db, twoFactor, reauth, mail, log } = this.deps;
    const code = input.code?.trim();
    if (!code && !input.password) throw invalidArgument('code', 'Send a current code, or your password.');
    const status = await twoFactor.status(user.id);
    if (!status.enabled) return; // Off already: nothing to prove, nothing to change.
    if (code) await reauth.code(user, code, scope);
    else await reauth.password(user, input.password!, scope);
    await db.transaction((trx) => twoFactor.disable(trx, user.id));
    audit(log, { event: 'credentials.two_factor_disabled', outcome: 'success', userId: user.id, ip: scope.ip, requestId: scope.requestId });
    await mail.credentialChanged(recipient(user), 'two_factor_disabled');
  }

  async regenerateRecoveryCodes(user: UserRow, code: string, scope: CallScope): Promise<string[]> {
    const { db, twoFactor, reauth, mail } = this.deps;
    if (code.trim() === '') throw invalidArgument('code', 'A current code is required.');
    const status = await twoFactor.status(user.id);
    if (!status.enabled) throw unprocessable('two_factor_not_enabled', 'Two-factor authentication is off: there are no recovery codes.');
    await reauth.code(user, code, scope);
    const codes = await db.transaction((trx) => twoFactor.regenerateRecoveryCodes(trx, user.id));
    audit(this.deps.log, { event: 'credentials.recovery_codes_regenerated', outcome: 'success', userId: user.id, ip: scope.ip, requestId: scope.requestId });
    await mail.credentialChanged(recipient(user), 'recovery_codes_regenerated');
    return codes;
  }
}
