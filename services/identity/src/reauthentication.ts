import { Code } from '@connectrpc/connect';
import { audit } from '@switchboard/runtime/audit';
import type { Knex } from '@switchboard/runtime/db';
import { apiError } from '@switchboard/runtime/errors';
import type { Logger } from '@switchboard/runtime/log';
import type { CallScope } from '@switchboard/runtime/server';
import type { LoginThrottle } from './login-throttle.js';
import type { PasswordHasher } from './passwords.js';
import type { UserRow } from './store/users.js';
import type { TwoFactor } from './two-factor.js';

/**
 * Re-authentication inside an authenticated call (password change, 2FA changes, deactivation):
 * a wrong password or code is 403 reauthentication_failed (docs/api/identity.md#re-authentication) and counts towards the same
 * brute-force counters as sign-in, so a stolen access token cannot guess the password freely.
 */

export const reauthenticationFailed = (field: string) =>
  apiError(Code.PermissionDenied, 'reauthentication_failed', field === 'code' ? 'The code is not valid.' : 'The password is not correct.', { field });

export class Reauthentication {
  constructor(private readonly deps: { db: Knex; log: Logger; passwords: PasswordHasher; twoFactor: TwoFactor; throttle: LoginThrottle }) {}

  async password(user: UserRow, password: string, scope: CallScope, field = 'password'): Promise<void> {
    const { passwords, throttle } = this.deps;
    const attempt = await throttle.begin('password', { account: user.email, ip: scope.ip, requestId: scope.requestId });
    const check = await throttle.checking(attempt, () => passwords.verify(user.password_hash, password, scope.signal));
    if (!check.ok) throw this.failed(user, scope, `wrong_${field}`, field);
    await throttle.release(attempt);
  }

  /** A current TOTP code (its time step is used up). */
  async code(user: UserRow, code: string, scope: CallScope): Promise<void> {
    const { db, twoFactor, throttle } = this.deps;
    const attempt = await throttle.begin('second_factor', { account: user.id, ip: scope.ip, requestId: scope.requestId });
    if (!(await twoFactor.verifyCode(db, user.id, code))) throw this.failed(user, scope, 'wrong_code', 'code');
    await throttle.release(attempt);
  }

  private failed(user: UserRow, scope: CallScope, reason: string, field: string) {
    audit(this.deps.log, { event: 'reauthentication', outcome: 'failure', userId: user.id, ip: scope.ip, requestId: scope.requestId, reason });
    return reauthenticationFailed(field);
  }
}
