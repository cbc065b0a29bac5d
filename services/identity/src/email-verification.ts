import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import { UserEmailVerifiedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import { newToken } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import type { Mailer } from '@switchboard/runtime/mail';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { EventWriter } from '@switchboard/runtime/service';
import type { Db } from '@switchboard/runtime/sql';
import { completeEmailVerification, insertEmailVerification, lockEmailVerification } from './store/email-verifications.js';

/**
 * Email verification: a single-use token (256 bits, stored as its SHA-256) valid for 24 hours,
 * mailed to the address; POST /v1/auth/verify-email redeems it (no credentials: the token is the
 * capability). A token for an address the account no longer has is refused. A redeemed token
 * emits `user.email_verified` in the same transaction (the outbox): billing grants the free
 * credit on it (docs/api/billing.md#free-credit-and-the-sandbox).
 */

export const verificationLifetimeMs = 24 * 3600 * 1000;

export class EmailVerifications {
  constructor(private readonly deps: { db: Knex; mailer: Mailer; log: Logger; recordEvent: EventWriter }) {}

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
  async send(user: { id: string; email: string; fullName: string | null }, token: string): Promise<void> {
    const greeting = user.fullName ? `Hello ${user.fullName},` : 'Hello,';
    const text = [
      greeting,
      '',
      `please confirm that ${user.email} is your email address for Switchboard.`,
      'Your verification token (valid for 24 hours):',
      '',
      token,
      '',
      'Send it to POST /v1/auth/verify-email as {"token": "..."}, or paste it where the app asks for it.',
      '',
      'If you did not create a Switchboard account, ignore this message.',
    ].join('\n');
    try {
      await this.deps.mailer.send({ to: user.email, subject: 'Confirm your email address', text, kind: 'email_verification' });
    } catch (err) {
      this.deps.log.error({ user_id: user.id, err: (err as Error).message }, 'could not send the verification mail');
    }
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
