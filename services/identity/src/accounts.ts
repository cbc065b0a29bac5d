import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, type ConnectError } from '@connectrpc/connect';
import { UserRegisteredSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { AccountSchema } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { type AuditRecord, type AuditTrail, audit } from '@switchboard/runtime/audit';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import type { CallScope } from '@switchboard/runtime/server';
import type { ActionLimits } from './action-limits.js';
import type { EmailVerifications } from './email-verification.js';
import type { LoginChallenges } from './login-challenge.js';
import { isTooManyAttempts, type LoginThrottle } from './login-throttle.js';
import type { PasswordHasher } from './passwords.js';
import { invalidCredentials, type Sessions, type SessionTokens } from './sessions.js';
import { DuplicateEmailError, emailRegistered, findUserByEmail, findUserById, insertUser, replacePasswordHash, type UserRow } from './store/users.js';
import { addOwner, type EventWriter, insertPersonalWorkspace, personalWorkspaceName } from './workspaces.js';

/** Accounts: registration, password sign-in and the account record (docs/api/identity.md#account-endpoints). */

export const maxEmailLength = 254;
const maxFullNameLength = 200;

// Local part: RFC 5322 dot-atom characters, no leading, trailing or doubled dots. Domain: at
// least two LDH labels (punycode for IDNs), the last alphabetic or an xn-- label.
const localPartPattern = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const domainLabelPattern = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** Trims and lower-cases an email address; throws a 400 on `field` unless its syntax is sane. */
export function normalizeEmail(raw: string, field = 'email'): string {
  const email = raw.trim().toLowerCase();
  if (email === '') throw invalidArgument(field, 'An email address is required.');
  if (email.length > maxEmailLength) throw invalidArgument(field, `The email address must be at most ${maxEmailLength} characters long.`);
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const labels = email.slice(at + 1).split('.');
  const valid =
    at > 0 &&
    local.length <= 64 &&
    localPartPattern.test(local) &&
    labels.length >= 2 &&
    labels.every((label) => domainLabelPattern.test(label)) &&
    /^([a-z]{2,63}|xn--[a-z0-9-]{1,59})$/.test(labels[labels.length - 1]);
  if (!valid) throw invalidArgument(field, 'Enter a valid email address, like name@example.com.');
  return email;
}

/** An optional full name: trimmed, 1..200 characters, no control characters; absent stays null. */
export function normalizeFullName(raw: string | undefined, field = 'full_name'): string | null {
  if (raw === undefined) return null;
  const name = raw.trim();
  const length = Array.from(name).length;
  if (length === 0) throw invalidArgument(field, 'The full name must not be empty; leave it out instead.');
  if (length > maxFullNameLength) throw invalidArgument(field, `The full name must be at most ${maxFullNameLength} characters long.`);
  if (/\p{Cc}/u.test(name)) throw invalidArgument(field, 'The full name must not contain control characters.');
  return name;
}

export function toAccount(user: UserRow): MessageInitShape<typeof AccountSchema> {
  return {
    userId: user.id,
    email: user.email,
    emailVerified: user.email_verified_at !== null,
    fullName: user.full_name ?? undefined,
    twoFactorEnabled: user.two_factor_enabled,
    personalWorkspaceId: user.personal_workspace_id,
    createdAt: timestampFromDate(user.created_at),
  };
}

export interface AccountsDeps {
  db: Knex;
  log: Logger;
  passwords: PasswordHasher;
  sessions: Sessions;
  verifications: EmailVerifications;
  recordEvent: EventWriter;
  throttle: LoginThrottle;
  challenges: LoginChallenges;
  limits: ActionLimits;
  audit: AuditTrail;
}

/** A password sign-in ends with a session, or with a second-factor challenge. */
export type LoginResult = { session: SessionTokens } | { mfaToken: string };

export class Accounts {
  constructor(private readonly deps: AccountsDeps) {}

  /**
   * Creates the user, the personal workspace with the user as owner, a session and a
   * verification token, and the events, in one transaction; then mails the token.
   * The input is validated already (normalizeEmail, assertAcceptablePassword, normalizeFullName).
   */
  async register(input: { email: string; password: string; fullName: string | null }, scope: CallScope): Promise<{ user: UserRow; session: SessionTokens }> {
    const { requestId } = scope;
    const { db, passwords, sessions, verifications, recordEvent } = this.deps;
    // Before the lookup and the hash: a registration costs an argon2 hash and a mail.
    await this.deps.limits.take('registration', { ip: scope.ip });
    // Cheap early answer; the unique index decides under concurrent sign-ups.
    if (await emailRegistered(db, input.email)) throw emailTaken();
    const passwordHash = await passwords.hash(input.password, scope.signal);
    const userId = newId('usr');
    let result: { user: UserRow; session: SessionTokens; verificationToken: string };
    try {
      result = await db.transaction(async (trx) => {
        const orgId = await insertPersonalWorkspace(trx, personalWorkspaceName(input.fullName, input.email));
        const user = await insertUser(trx, { id: userId, email: input.email, fullName: input.fullName, passwordHash, personalWorkspaceId: orgId });
        await recordEvent(trx, UserRegisteredSchema, { data: { userId, personalWorkspaceId: orgId }, requestId });
        await addOwner(trx, recordEvent, { orgId, userId, personal: true, requestId });
        const verificationToken = await verifications.issue(trx, user);
        const session = await sessions.open(trx, userId, { origin: scope });
        return { user, session, verificationToken };
      });
    } catch (err) {
      if (err instanceof DuplicateEmailError) throw emailTaken();
      throw err;
    }
    this.deps.log.info({ user_id: userId, request_id: requestId }, 'account registered');
    await verifications.send({ id: userId, email: result.user.email, fullName: result.user.full_name }, result.verificationToken);
    return { user: result.user, session: result.session };
  }

  /**
   * Password sign-in. Unknown addresses verify against a dummy hash of the same cost, and every
   * failure is the same 401 and counts the same way, so neither the answer nor its timing tells
   * whether an account exists. Throttled per address and per IP (429 + Retry-After). With 2FA
   * on, the answer is a challenge, never a session.
   */
  async login(input: { email: string; password: string; ip?: string; userAgent?: string; requestId?: string; signal?: AbortSignal }): Promise<LoginResult> {
    const { db, passwords, sessions, log, throttle, challenges } = this.deps;
    // No account can have such an address: the same 401, at the same cost, without a lookup;
    // it still counts against the client's address, or such guesses would be free.
    const impossible = input.email.length > maxEmailLength || input.email.includes('\u0000');
    const origin = { ip: input.ip, requestId: input.requestId };
    const attempt = await throttle.begin('password', impossible ? origin : { ...origin, account: input.email }).catch(async (err: unknown) => {
      if (isTooManyAttempts(err) && !impossible) await this.throttled(input);
      throw err;
    });
    if (impossible) {
      await throttle.checking(attempt, () => passwords.verifyDummy(input.password, input.signal));
      await throttle.fail(attempt);
      throw await this.failedLogin(input, undefined, 'malformed_email');
    }
    const user = await findUserByEmail(db, input.email);
    if (!user || user.deactivated_at !== null) {
      await throttle.checking(attempt, () => passwords.verifyDummy(input.password, input.signal));
      await throttle.fail(attempt);
      throw await this.failedLogin(input, user ?? undefined, user ? 'deactivated' : 'unknown_account');
    }
    const check = await throttle.checking(attempt, () => passwords.verify(user.password_hash, input.password, input.signal));
    if (!check.ok) {
      await throttle.fail(attempt);
      throw await this.failedLogin(input, user, 'wrong_password');
    }
    let checkedHash = user.password_hash;
    // Rehashing is an improvement, not part of signing in: a busy hasher skips it this time.
    const rehashed = check.needsRehash ? await passwords.hash(input.password, input.signal).catch(() => undefined) : undefined;
    if (rehashed && (await replacePasswordHash(db, user.id, user.password_hash, rehashed))) {
      log.info({ user_id: user.id }, 'password rehashed with the current argon2 parameters');
      checkedHash = rehashed;
    }
    if (user.two_factor_enabled) {
      await throttle.succeed(attempt, 'password', input.email);
      // The password step alone is no sign-in: the record comes with the second factor.
      audit(log, {
        event: 'login.password',
        outcome: 'success',
        userId: user.id,
        ip: input.ip,
        requestId: input.requestId,
        details: { second_factor_required: true },
      });
      return { mfaToken: await challenges.issue(user.id) };
    }
    const session = await db.transaction(async (trx) => {
      const opened = await sessions.open(trx, user.id, {
        checkedPasswordHash: checkedHash,
        attemptsToDelete: throttle.successDeletion(attempt, 'password', input.email),
        origin: { ip: input.ip, userAgent: input.userAgent },
      });
      await this.deps.audit.record(trx, signInRecord('user.signed_in', 'success', user, input, { method: 'password' }));
      return opened;
    });
    return { session };
  }

  /**
   * The 401 of a failed password sign-in, and its audit line; a wrong password of an account is
   * also a record of its personal workspace (an unknown or deactivated account: the line only).
   */
  private async failedLogin(input: { ip?: string; requestId?: string }, user: UserRow | undefined, reason: string): Promise<ConnectError> {
    const record = signInRecord('user.sign_in_failed', 'failed', user, input, { reason });
    if (reason !== 'wrong_password') record.workspaceId = '';
    await this.deps.audit.recordAlone(record);
    return invalidCredentials();
  }

  /** The record of a sign-in refused by the throttle (429), for an address that is an account's. */
  private async throttled(input: { email: string; ip?: string; requestId?: string }): Promise<void> {
    if (!this.deps.throttle.shouldRecordRefusal(`password:${input.email}`)) return;
    const user = await findUserByEmail(this.deps.db, input.email).catch(() => undefined);
    await this.deps.audit.recordAlone(
      signInRecord('user.sign_in_throttled', 'denied', user ?? undefined, input, { reason: 'too_many_attempts', step: 'password' }),
    );
  }

  /** The account of `userId`; 404 when it does not exist. */
  async get(userId: string): Promise<UserRow> {
    const user = await findUserById(this.deps.db, userId);
    if (!user) throw apiError(Code.NotFound, 'account_not_found', 'The account does not exist.');
    return user;
  }
}

/** A sign-in record of `user` (none known: a log line only), in their personal workspace. */
export function signInRecord(
  action: string,
  outcome: AuditRecord['outcome'],
  user: Pick<UserRow, 'id' | 'personal_workspace_id'> | undefined,
  scope: { ip?: string; requestId?: string },
  metadata: AuditRecord['metadata'],
): AuditRecord {
  return {
    action,
    outcome,
    actor: { type: 'user', id: user?.id ?? '', ip: scope.ip },
    target: user ? { type: 'user', id: user.id } : undefined,
    workspaceId: user?.personal_workspace_id ?? '',
    requestId: scope.requestId,
    subjectUserId: user?.id,
    metadata,
  };
}

function emailTaken(): ConnectError {
  return apiError(Code.AlreadyExists, 'email_taken', 'An account with this email address already exists.', { field: 'email' });
}
