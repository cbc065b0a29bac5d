import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { UserEmailVerifiedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Db } from '@switchboard/runtime/sql';
import type { ActionLimits } from './action-limits.js';
import type { AccountMail, MailRecipient } from './notifications.js';
import { completeEmailVerification, countRecentEmailVerifications, insertEmailVerification, lockEmailVerification } from './store/email-verifications.js';
import { findUserByEmail, lockUser } from './store/users.js';

/**
 * Email verification: a single-use token (256 bits, stored as its SHA-256) valid for 24 hours,
 * mailed to the address; POST /v1/auth/verify-email redeems it (no credentials: the token is the
 * capability). A token for an address the account no longer has is refused. A redeemed token
 * emits `user.email_verified` in the same transaction (the outbox): billing grants the free
 * credit on it (docs/api/billing.md#free-credit-and-the-sandbox). POST /v1/auth/verify-email/resend
 * mails a new token (docs/api/identity.md#password-reset-and-email-verification).
 */

export const verificationLifetimeMs = 24 * 3600 * 1000;
/** At most this many verification mails per account within the window, registration's included (as reset mails). */
const maxVerificationMailsPerWindow = 3;
const verificationMailWindowSeconds = 15 * 60;

export class EmailVerifications {
  constructor(private readonly deps: { db: Knex; mail: AccountMail; log: Logger; recordEvent: EventWriter; limits: Pick<ActionLimits, 'take'> }) {}

  /** Stores a new token for `email` in `trx` and returns it (to mail after commit). */
  async issue(trx: Db, user: { id: string; email: string }): Promise<string> {
    const token = newToken();
    await insertEmailVerification(trx, {
      tokenHash: sha256Hex(token),
      userId: user.id,
      email: user.email,
      expiresAt: new Date(Date.now() + verificationLifetimeMs),
    });
    return token;
  }

  /**
   * Mails the token. Called after the account is committed; a mail failure is logged and does
   * not undo the registration (the token stays valid; a resend can follow).
   */
  async send(user: MailRecipient, token: string): Promise<void> {
    await this.deps.mail.emailVerification(user, token);
  }

  /**
   * The resend: counted against the client's address first (429 `rate_limited` past
   * VERIFICATION_RESENDS_PER_IP_PER_HOUR, whatever the address asked for, so it tells nothing),
   * then answered at once; the lookup, the token and the mail follow in the background, like a
   * reset request, so neither the answer nor its timing tells whether the address has an account.
   */
  async requestResend(email: string | undefined, scope: { ip?: string; requestId?: string }): Promise<void> {
    await this.deps.limits.take('verification_resend', { ip: scope.ip });
    if (!email) return;
    this.resend(email, scope.requestId).catch((err) =>
      this.deps.log.error({ request_id: scope.requestId, err: (err as Error).message }, 'verification resend failed'),
    );
  }

  /**
   * Mails a new token to an active account whose current address is not verified, within the
   * per-account cap. Every request ends with one log line of its outcome (never the address).
   */
  private async resend(email: string, requestId?: string): Promise<void> {
    const { db, log } = this.deps;
    const user = await findUserByEmail(db, email);
    const done = (outcome: 'sent' | 'throttled' | 'no_unverified_account') =>
      log.info({ user_id: user?.id, request_id: requestId, outcome }, 'verification resend handled');
    if (!user || user.deactivated_at !== null || user.email_verified_at !== null) return done('no_unverified_account');
    // Nobody gets mail-bombed: past a few mails in a quarter of an hour (registration's
    // counts) requests are dropped. Counted under the user row's lock, so a burst cannot all
    // see room under the cap.
    const issued = await db.transaction(async (trx) => {
      const locked = await lockUser(trx, user.id);
      if (!locked || locked.email_verified_at !== null || locked.deactivated_at !== null || locked.email !== user.email) return 'no_unverified_account';
      if ((await countRecentEmailVerifications(trx, user.id, verificationMailWindowSeconds)) >= maxVerificationMailsPerWindow) return 'throttled';
      return { token: await this.issue(trx, locked) };
    });
    if (typeof issued === 'string') return done(issued);
    await this.send({ id: user.id, email: user.email, fullName: user.full_name }, issued.token);
    done('sent');
  }

  /** Redeems a token: 400 invalid_token when unknown, used, expired or for an old address. */
  async verify(token: string, options: { requestId?: string; now?: Date } = {}): Promise<void> {
    const { requestId, now = new Date() } = options;
    const verified = await this.deps.db.transaction(async (trx) => {
      const row = await lockEmailVerification(trx, sha256Hex(token));
      if (!row || row.used_at !== null || row.expires_at.getTime() <= now.getTime()) return false;
      const user = await completeEmailVerification(trx, sha256Hex(token), row.user_id, row.email, now);
      if (!user) return false;
      await this.deps.recordEvent(trx, UserEmailVerifiedSchema, {
        workspaceId: user.personalWorkspaceId,
        data: { userId: row.user_id, personalWorkspaceId: user.personalWorkspaceId, verifiedAt: timestampFromDate(now) },
        requestId,
      });
      this.deps.log.info({ user_id: row.user_id, request_id: requestId }, 'email verified');
      return true;
    });
    if (!verified) {
      throw apiError(Code.InvalidArgument, 'invalid_token', 'The verification token is not valid, was used already or has expired.', { field: 'token' });
    }
  }
}
