import type { AuditRecord, AuditTrail } from '@switchboard/runtime/audit';
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
  audit: AuditTrail;
}

/** A record of a user's change to their own account, in their personal workspace. */
function accountRecord(user: UserRow, action: string, scope: CallScope, metadata?: AuditRecord['metadata']): AuditRecord {
  return {
    action,
    outcome: 'success',
    actor: { type: 'user', id: user.id, ip: scope.ip },
    target: { type: 'user', id: user.id },
    workspaceId: user.personal_workspace_id,
    requestId: scope.requestId,
    subjectUserId: user.id,
    metadata,
  };
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
    const { db, passwords, sessions, reauth, mail, audit } = this.deps;
    if (input.currentPassword === '') throw invalidArgument('current_password', 'current_password is required.');
    assertAcceptablePassword(input.newPassword, user.email, 'new_password');
    await reauth.password(user, input.currentPassword, scope, 'current_password');
    const passwordHash = await passwords.hash(input.newPassword, scope.signal);
    const revoked = await db.transaction(async (trx) => {
      await setPasswordHash(trx, user.id, passwordHash);
      // A reset mailed before the change must not undo it (docs/api/identity.md#password-reset-and-email-verification): outstanding tokens die.
      await usePasswordResets(trx, user.id, new Date());
      const ids = await sessions.revoke(trx, { userId: user.id, reason: 'password_change', except: input.currentSessionId, requestId, ip: scope.ip });
      await audit.record(trx, accountRecord(user, 'user.password_changed', scope, { sessions_revoked: ids.length }));
      return ids;
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
    const codes = await this.deps.twoFactor.activate(user, code, (trx) => this.deps.audit.record(trx, accountRecord(user, 'user.two_factor_enabled', scope)));
    await this.deps.mail.credentialChanged(recipient(user), 'two_factor_enabled');
    return codes;
  }

  /** Needs a current code or the password (docs/api/identity.md#two-factor-authentication). */
  async disableTwoFactor(user: UserRow, input: { code?: string; password?: string }, scope: CallScope): Promise<void> {
    const { db, twoFactor, reauth, mail, audit } = this.deps;
    const code = input.code?.trim();
    if (!code && !input.password) throw invalidArgument('code', 'Send a current code, or your password.');
    const status = await twoFactor.status(user.id);
    if (!status.enabled) return; // Off already: nothing to prove, nothing to change.
    if (code) await reauth.code(user, code, scope);
    else await reauth.password(user, input.password!, scope);
    await db.transaction(async (trx) => {
      await twoFactor.disable(trx, user.id);
      await audit.record(trx, accountRecord(user, 'user.two_factor_disabled', scope, { proof: code ? 'code' : 'password' }));
    });
    await mail.credentialChanged(recipient(user), 'two_factor_disabled');
  }

  async regenerateRecoveryCodes(user: UserRow, code: string, scope: CallScope): Promise<string[]> {
    const { db, twoFactor, reauth, mail } = this.deps;
    if (code.trim() === '') throw invalidArgument('code', 'A current code is required.');
    const status = await twoFactor.status(user.id);
    if (!status.enabled) throw unprocessable('two_factor_not_enabled', 'Two-factor authentication is off: there are no recovery codes.');
    await reauth.code(user, code, scope);
    const codes = await db.transaction(async (trx) => {
      const fresh = await twoFactor.regenerateRecoveryCodes(trx, user.id);
      await this.deps.audit.record(trx, accountRecord(user, 'user.recovery_codes_regenerated', scope));
      return fresh;
    });
    await mail.credentialChanged(recipient(user), 'recovery_codes_regenerated');
    return codes;
  }
}
