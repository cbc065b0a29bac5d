import { randomBytes } from 'node:crypto';
import { Code } from '@connectrpc/connect';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { apiError, invalidArgument } from '@switchboard/runtime/errors';
import { type DataKeyRing, sha256Hex } from '@switchboard/runtime/secrets';
import type { Db } from '@switchboard/runtime/sql';
import * as OTPAuth from 'otpauth';
import {
  activateTwoFactor,
  claimTotpStep,
  consumeRecoveryCode,
  countRecoveryCodes,
  deleteTwoFactor,
  findTwoFactor,
  replaceRecoveryCodes,
  savePendingTwoFactor,
} from './store/two-factor.js';
import { setTwoFactorEnabled, type UserRow } from './store/users.js';

/**
 * TOTP two-factor authentication (docs/api/identity.md#two-factor-authentication): RFC 6238 with SHA1, 30 s steps, 6 digits, ±1 step,
 * a 160-bit secret encrypted at rest. The last accepted time step is stored and moved forward
 * in one conditional UPDATE, so no code (the activation code included) is accepted twice, not
 * even by two concurrent requests. Ten recovery codes of 125 bits each (≥ 112, ASVS 6.5), stored as SHA-256,
 * single use; regenerating replaces the set.
 */

export const totpIssuer = 'Switchboard';
const totpPeriodSeconds = 30;
const totpDigits = 6;
const totpWindow = 1;
const secretBytes = 20;
export const totpSecretPurpose = 'identity.totp-secret';
export const recoveryCodeCount = 10;
const base32Alphabet = 'abcdefghijklmnopqrstuvwxyz234567';

export const invalidCodeInput = (field = 'code') => invalidArgument(field, 'The code must be the 6 digits your authenticator app shows.');

function totp(secretBase32: string, label: string): OTPAuth.TOTP {
  return new OTPAuth.TOTP({
    issuer: totpIssuer,
    label,
    algorithm: 'SHA1',
    digits: totpDigits,
    period: totpPeriodSeconds,
    secret: OTPAuth.Secret.fromBase32(secretBase32),
  });
}

/**
 * A recovery code: 25 base32 characters (125 bits, so a stored SHA-256 needs no pepper to resist
 * offline guessing) in groups of five, e.g. `ab3de-…`.
 */
function newRecoveryCode(): string {
  const bytes = randomBytes(25);
  let code = '';
  for (const byte of bytes) code += base32Alphabet[byte & 31];
  return code.match(/.{5}/g)!.join('-');
}

export function normalizeRecoveryCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]/g, '');
}

export function isTotpCodeShape(code: string): boolean {
  return /^\d{6}$/.test(code.trim());
}

export class TwoFactor {
  constructor(private readonly deps: { db: Knex; dataKeys: DataKeyRing; clock?: Clock }) {}

  private now(): Date {
    return (this.deps.clock ?? systemClock)();
  }

  async status(userId: string): Promise<{ enabled: boolean; enabledAt: Date | null; recoveryCodesRemaining: number }> {
    const row = await findTwoFactor(this.deps.db, userId);
    const enabled = Boolean(row?.secret_encrypted);
    return { enabled, enabledAt: row?.enabled_at ?? null, recoveryCodesRemaining: enabled ? await countRecoveryCodes(this.deps.db, userId) : 0 };
  }

  /** A new pending secret (replacing an earlier pending one); 409 when 2FA is on already. */
  async enroll(user: UserRow): Promise<{ secret: string; otpauthUri: string }> {
    const row = await findTwoFactor(this.deps.db, user.id);
    if (row?.secret_encrypted)
      throw apiError(Code.AlreadyExists, 'two_factor_already_enabled', 'Two-factor authentication is on already; disable it first to enroll again.');
    const secret = new OTPAuth.Secret({ size: secretBytes }).base32;
    await savePendingTwoFactor(this.deps.db, user.id, this.deps.dataKeys.encrypt(secret, totpSecretPurpose));
    return { secret, otpauthUri: totp(secret, user.email).toString() };
  }

  /** Activates the pending secret with its first code; returns the recovery codes (shown once). */
  /** Turns 2FA on with the first code; `inTransaction` (the audit record) runs in the transaction that does. */
  async activate(user: UserRow, code: string, inTransaction?: (trx: Knex.Transaction) => Promise<void>): Promise<string[]> {
    if (!isTotpCodeShape(code)) throw invalidCodeInput();
    const row = await findTwoFactor(this.deps.db, user.id);
    if (row?.secret_encrypted) throw apiError(Code.AlreadyExists, 'two_factor_already_enabled', 'Two-factor authentication is on already.');
    if (!row?.pending_secret_encrypted) {
      throw apiError(Code.FailedPrecondition, 'two_factor_not_enrolled', 'Start with POST /v1/account/2fa/enroll.', { httpStatus: 422 });
    }
    const step = this.acceptedStep(this.deps.dataKeys.decrypt(row.pending_secret_encrypted, totpSecretPurpose), code);
    const codes = Array.from({ length: recoveryCodeCount }, newRecoveryCode);
    const activated =
      step !== undefined &&
      (await this.deps.db.transaction(async (trx) => {
        if (!(await activateTwoFactor(trx, user.id, row.pending_secret_encrypted!, step, this.now()))) return false;
        await replaceRecoveryCodes(
          trx,
          user.id,
          codes.map((c) => sha256Hex(normalizeRecoveryCode(c))),
        );
        await setTwoFactorEnabled(trx, user.id, true);
        await inTransaction?.(trx);
        return true;
      }));
    if (!activated)
      throw apiError(Code.InvalidArgument, 'invalid_code', 'The code is not valid; enter the current code of your authenticator app.', { field: 'code' });
    return codes;
  }

  /** Checks a TOTP code and claims its time step in `db` (a transaction or the pool). */
  async verifyCode(db: Db, userId: string, code: string): Promise<boolean> {
    if (!isTotpCodeShape(code)) return false;
    const row = await findTwoFactor(db, userId);
    if (!row?.secret_encrypted) return false;
    const step = this.acceptedStep(this.deps.dataKeys.decrypt(row.secret_encrypted, totpSecretPurpose), code);
    return step !== undefined && claimTotpStep(db, userId, step);
  }

  verifyRecoveryCode(db: Db, userId: string, code: string): Promise<boolean> {
    const normalized = normalizeRecoveryCode(code);
    if (normalized.length === 0) return Promise.resolve(false);
    return consumeRecoveryCode(db, userId, sha256Hex(normalized), this.now());
  }

  /** Turns 2FA off (the caller has re-authenticated). */
  async disable(trx: Db, userId: string): Promise<void> {
    await deleteTwoFactor(trx, userId);
    await setTwoFactorEnabled(trx, userId, false);
  }

  /** Replaces the recovery codes (the caller has re-authenticated). */
  async regenerateRecoveryCodes(trx: Db, userId: string): Promise<string[]> {
    const codes = Array.from({ length: recoveryCodeCount }, newRecoveryCode);
    await replaceRecoveryCodes(
      trx,
      userId,
      codes.map((c) => sha256Hex(normalizeRecoveryCode(c))),
    );
    return codes;
  }

  /** The RFC 6238 time step the code belongs to (±1 step around now), or undefined. */
  private acceptedStep(secretBase32: string, code: string): number | undefined {
    const timestamp = this.now().getTime();
    const delta = totp(secretBase32, 'x').validate({ token: code.trim(), window: totpWindow, timestamp });
    if (delta === null) return undefined;
    return Math.floor(timestamp / 1000 / totpPeriodSeconds) + delta;
  }
}
