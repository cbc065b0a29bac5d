import { Code } from '@connectrpc/connect';
import type { AuditTrail } from '@switchboard/runtime/audit';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { sha256Hex } from '@switchboard/runtime/secrets';
import { signInRecord } from './accounts.js';
import { isTooManyAttempts, type LoginThrottle } from './login-throttle.js';
import type { Sessions, SessionTokens } from './sessions.js';
import { findMfaChallenge, insertMfaChallenge, lockMfaChallenge, type MfaChallengeRow, updateMfaChallenge } from './store/login-challenges.js';
import { findUserById, passwordChangedSince } from './store/users.js';
import type { TwoFactor } from './two-factor.js';

/**
 * The second step of a sign-in with 2FA on (docs/api/identity.md#two-factor-authentication): the password step hands out an opaque
 * `mfa_token` (`mfa_…`, 256 bits, stored hashed; not a JWT, so it never passes as an access
 * token), valid 5 minutes (MFA_TOKEN_TTL) for at most 5 codes; POST /v1/auth/login/2fa trades
 * it and a TOTP or recovery code for an aal2 session.
 */

export const defaultMfaTokenTtlMs = 5 * 60 * 1000;
export const maxChallengeAttempts = 5;

export const invalidMfaToken = () =>
  apiError(Code.InvalidArgument, 'invalid_token', 'The mfa_token is not valid or has expired; sign in again.', { field: 'mfa_token' });

export interface LoginChallengesDeps {
  db: Knex;
  log: Logger;
  sessions: Sessions;
  twoFactor: TwoFactor;
  throttle: LoginThrottle;
  clock?: Clock;
  ttlMs?: number;
  audit: AuditTrail;
}

export class LoginChallenges {
  constructor(private readonly deps: LoginChallengesDeps) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  /** A new challenge for `userId`; returns the mfa_token. */
  async issue(userId: string): Promise<string> {
    const token = `mfa_${newToken()}`;
    const expiresAt = new Date(this.now().getTime() + (this.deps.ttlMs ?? defaultMfaTokenTtlMs));
    await insertMfaChallenge(this.deps.db, { tokenHash: sha256Hex(token), userId, expiresAt });
    return token;
  }

  async complete(input: {
    mfaToken: string;
    code?: string;
    recoveryCode?: string;
    ip?: string;
    userAgent?: string;
    requestId?: string;
  }): Promise<SessionTokens> {
    const { db, twoFactor, throttle, sessions } = this.deps;
    if (input.mfaToken === '') throw invalidArgument('mfa_token', 'mfa_token is required.');
    const code = input.code?.trim() || undefined;
    const recoveryCode = input.recoveryCode?.trim() || undefined;
    if (!code && !recoveryCode) throw invalidArgument('code', 'Send the code of your authenticator app, or a recovery_code.');
    if (code && recoveryCode) throw invalidArgument('recovery_code', 'Send either code or recovery_code, not both.');
    const tokenHash = sha256Hex(input.mfaToken);
    const peek = await findMfaChallenge(db, tokenHash);
    if (!peek || !this.usable(peek)) throw invalidMfaToken();
    const attempt = await throttle.begin('second_factor', { account: peek.user_id, ip: input.ip, requestId: input.requestId }).catch(async (err: unknown) => {
      if (isTooManyAttempts(err) && throttle.shouldRecordRefusal(`second_factor:${peek.user_id}`)) {
        const user = await findUserById(db, peek.user_id).catch(() => undefined);
        await this.deps.audit.recordAlone(
          signInRecord('user.sign_in_throttled', 'denied', user, input, { reason: 'too_many_attempts', step: 'second_factor' }),
        );
      }
      throw err;
    });
    const method = code ? 'totp' : 'recovery_code';
    const outcome = await db.transaction(async (trx) => {
      const challenge = await lockMfaChallenge(trx, tokenHash);
      if (!challenge || !this.usable(challenge)) return { kind: 'invalid' as const };
      const user = await findUserById(trx, challenge.user_id);
      // A password reset or change after the challenge was issued ends it.
      if (!user || user.deactivated_at !== null || (await passwordChangedSince(trx, user.id, challenge.created_at))) return { kind: 'invalid' as const };
      const ok = code ? await twoFactor.verifyCode(trx, user.id, code) : await twoFactor.verifyRecoveryCode(trx, user.id, recoveryCode!);
      if (!ok) {
        await updateMfaChallenge(trx, tokenHash, { attempts: challenge.attempts + 1 });
        return { kind: 'wrong' as const, user };
      }
      await updateMfaChallenge(trx, tokenHash, { used_at: this.now() });
      const session = await sessions.open(trx, user.id, {
        aal: 'aal2',
        checkedPasswordHash: user.password_hash,
        origin: { ip: input.ip, userAgent: input.userAgent },
      });
      await this.deps.audit.record(trx, signInRecord('user.signed_in', 'success', user, input, { method }));
      return { kind: 'ok' as const, userId: user.id, session };
    });
    if (outcome.kind === 'invalid') {
      await throttle.release(attempt);
      throw invalidMfaToken();
    }
    if (outcome.kind === 'wrong') {
      await throttle.fail(attempt);
      await this.deps.audit.recordAlone(
        signInRecord('user.sign_in_failed', 'failed', outcome.user, input, { reason: code ? 'wrong_code' : 'wrong_recovery_code' }),
      );
      throw apiError(Code.Unauthenticated, 'invalid_code', 'The code is not valid.', { field: code ? 'code' : 'recovery_code' });
    }
    await throttle.succeed(attempt, 'second_factor', outcome.userId);
    return outcome.session;
  }

  private usable(challenge: MfaChallengeRow): boolean {
    return challenge.used_at === null && challenge.attempts < maxChallengeAttempts && challenge.expires_at.getTime() > this.now().getTime();
  }
}
