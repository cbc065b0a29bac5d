import { newId, newToken } from '@switchboard/runtime/ids';
import { sha256Hex } from '@switchboard/runtime/secrets';
import type { SessionSchema } from '@switchboard/runtime/gen/switchboard/identity/v1/identity_pb';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { SigningKeys } from './signing-keys.js';
import { insertRefreshToken, insertSession, type Db } from './store.js';

/**
 * Sessions (SPEC §3): a session row (`ses_…`, the `sid` of its access tokens) and an opaque
 * refresh token (256 bits) stored only as its SHA-256. Sessions end 30 days after sign-in at the
 * latest; refresh-token rotation, idle expiry and revocation grow on these tables.
 */

export const sessionLifetimeMs = 30 * 24 * 3600 * 1000;
/** Refresh tokens not used for this long stop working (checked at refresh). */
export const sessionIdleTimeoutMs = 7 * 24 * 3600 * 1000;

export type SessionTokens = MessageInitShape<typeof SessionSchema>;

export class Sessions {
  constructor(private readonly signingKeys: SigningKeys) {}

  /**
   * Opens a session for `userId` inside `trx` and returns its tokens. The access token is
   * signed before the transaction commits, so a signing failure leaves nothing behind.
   */
  async open(trx: Db, userId: string, aal: 'aal1' | 'aal2' = 'aal1'): Promise<SessionTokens> {
    const sessionId = newId('ses');
    const refreshToken = newToken();
    await insertSession(trx, { id: sessionId, userId, aal, expiresAt: new Date(Date.now() + sessionLifetimeMs) });
    await insertRefreshToken(trx, { tokenHash: sha256Hex(refreshToken), sessionId, parentHash: null });
    const access = await this.signingKeys.signAccessToken({ userId, sessionId, aal });
    return { accessToken: access.token, refreshToken, tokenType: 'Bearer', expiresIn: access.expiresIn };
  }
}
