import { fileURLToPath } from 'node:url';
import { systemClock } from '@switchboard/runtime/clock';
import { readDuration } from '@switchboard/runtime/config';
import { createMailer } from '@switchboard/runtime/mail';
import { runService } from '@switchboard/runtime/service';
import { AccountSettings } from './account-settings.js';
import { Accounts } from './accounts.js';
import { ActionLimits, readActionLimits } from './action-limits.js';
import { Deactivations } from './deactivation.js';
import { EmailVerifications } from './email-verification.js';
import { startHousekeeping } from './erasure.js';
import { defaultInvitationTtl, Invitations } from './invitations.js';
import { LoginChallenges } from './login-challenge.js';
import { LoginThrottle } from './login-throttle.js';
import { Members } from './members.js';
import { AccountMail } from './notifications.js';
import { Organizations } from './organizations.js';
import { Ownership } from './ownership.js';
import { PasswordResets } from './password-reset.js';
import { PasswordHasher } from './passwords.js';
import { Reauthentication } from './reauthentication.js';
import { type IdentityHandlers, registerRoutes } from './server.js';
import { Sessions } from './sessions.js';
import { SigningKeys, signingKeyPurpose } from './signing-keys.js';
import { TwoFactor, totpSecretPurpose } from './two-factor.js';

await runService<IdentityHandlers>({
  name: 'identity',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [
    { table: 'signing_keys', keyColumn: 'kid', column: 'private_jwk_encrypted', purpose: signingKeyPurpose },
    { table: 'two_factor', keyColumn: 'user_id', column: 'secret_encrypted', purpose: totpSecretPurpose },
    { table: 'two_factor', keyColumn: 'user_id', column: 'pending_secret_encrypted', purpose: totpSecretPurpose },
  ],
  // Before the first call: the dummy hash for unknown-email logins, and the signing key
  // (generated on the very first start).
  async prepare(runtime) {
    const { db, log, recordEvent } = runtime;
    const clock = systemClock;
    const passwords = new PasswordHasher();
    runtime.metrics.gauge('argon2_queue', 'Password hashes running and waiting for a slot (past the queue limit a request gets 503).', ['state'], (gauge) => {
      const { running, queued } = passwords.load;
      gauge.set({ state: 'running' }, running);
      gauge.set({ state: 'queued' }, queued);
    });
    const { dataKeys } = runtime.config;
    const signingKeys = new SigningKeys({ db, log, dataKeys });
    await Promise.all([passwords.prepare(), signingKeys.ready()]);
    const mailer = createMailer({ log });
    const mail = new AccountMail({ mailer, log });
    const sessions = new Sessions({ db, signingKeys, dataKeys, recordEvent, log, clock });
    const throttle = new LoginThrottle({ db, log, clock });
    const twoFactor = new TwoFactor({ db, dataKeys, clock });
    const challenges = new LoginChallenges({ db, log, sessions, twoFactor, throttle, clock, ttlMs: readDuration('MFA_TOKEN_TTL', '5m') });
    const reauth = new Reauthentication({ db, log, passwords, twoFactor, throttle });
    const verifications = new EmailVerifications({ db, mailer, log });
    const limits = new ActionLimits({ db, clock, limits: readActionLimits() });
    const accounts = new Accounts({ db, log, passwords, sessions, verifications, recordEvent, throttle, challenges, limits });
    return {
      accounts,
      signingKeys,
      sessions,
      challenges,
      verifications,
      twoFactor,
      passwordResets: new PasswordResets({ db, log, passwords, sessions, mail, throttle, clock, ttlMs: readDuration('PASSWORD_RESET_TTL', '1h') }),
      settings: new AccountSettings({ db, log, passwords, sessions, twoFactor, reauth, mail }),
      deactivations: new Deactivations({ db, log, sessions, reauth, mail, recordEvent, clock, eraseAfterMs: readDuration('ACCOUNT_ERASE_AFTER', '30d') }),
      organizations: new Organizations({ db, log, recordEvent, limits }),
      members: new Members({ db, log, recordEvent }),
      // INVITATION_TTL: how long an invitation stays valid (7d; tests shorten it).
      invitations: new Invitations({ db, log, mailer, recordEvent, ttlMs: readDuration('INVITATION_TTL', defaultInvitationTtl), limits }),
      ownership: new Ownership({ db, log, recordEvent }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime) => [
    startHousekeeping({
      db: runtime.db,
      log: runtime.log,
      // Stateless (its state is in Postgres): the job's own instance prunes the counters.
      throttle: new LoginThrottle({ db: runtime.db, log: runtime.log }),
      intervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h'),
    }),
  ],
});
