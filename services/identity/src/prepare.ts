import { ConversationService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { systemClock } from '@switchboard/runtime/clock';
import { createRolePool } from '@switchboard/runtime/db';
import { createMailer } from '@switchboard/runtime/mail';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { AccountSettings } from './account-settings.js';
import { Accounts } from './accounts.js';
import { ActionLimits } from './action-limits.js';
import { AuditLog, auditWriterRole } from './audit-log.js';
import type { IdentityConfig } from './config.js';
import { DataExports } from './data-exports.js';
import { Deactivations } from './deactivation.js';
import { EmailVerifications } from './email-verification.js';
import { Invitations } from './invitations.js';
import { LoginChallenges } from './login-challenge.js';
import { LoginThrottle } from './login-throttle.js';
import { Members } from './members.js';
import { AccountMail } from './notifications.js';
import { Organizations } from './organizations.js';
import { Ownership } from './ownership.js';
import { PasswordResets } from './password-reset.js';
import { PasswordHasher } from './passwords.js';
import { Reauthentication } from './reauthentication.js';
import type { IdentityHandlers } from './server.js';
import { Sessions } from './sessions.js';
import { SigningKeys } from './signing-keys.js';
import { TwoFactor } from './two-factor.js';

/** What the identity handlers are built from: the parts of the service runtime they use. */
export type IdentityRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'metrics' | 'meshTokens' | 'audit'> & {
  config: Pick<ServiceRuntime['config'], 'dataKeys'>;
};

/**
 * The domain modules behind the identity handlers, as main.ts (and the in-process test) builds
 * them. Before the first call: the dummy hash for unknown-email logins, and the signing key
 * (generated on the very first start).
 */
export async function prepareIdentity(runtime: IdentityRuntime, config: IdentityConfig): Promise<IdentityHandlers> {
  const { db, log, recordEvent } = runtime;
  const clock = systemClock;
  const { audit } = runtime;
  const auditLog = new AuditLog({ db, reader: createRolePool(db, auditWriterRole), log, retentionMs: config.auditRetentionMs });
  const passwords = new PasswordHasher(config.argon2Concurrency, config.argon2QueueLimit);
  runtime.metrics.gauge('argon2_queue', 'Password hashes running and waiting for a slot (past the queue limit a request gets 503).', ['state'], (gauge) => {
    const { running, queued } = passwords.load;
    gauge.set({ state: 'running' }, running);
    gauge.set({ state: 'queued' }, queued);
  });
  const { dataKeys } = runtime.config;
  const signingKeys = new SigningKeys({ db, log, dataKeys });
  await Promise.all([passwords.prepare(), signingKeys.ready()]);
  const mailer = createMailer({ log });
  const mail = new AccountMail({ mailer, log, publicUrl: config.publicUrl });
  const sessions = new Sessions({ db, signingKeys, dataKeys, recordEvent, log, clock, audit });
  const throttle = new LoginThrottle({ db, log, clock });
  const twoFactor = new TwoFactor({ db, dataKeys, clock });
  const challenges = new LoginChallenges({ db, log, sessions, twoFactor, throttle, clock, ttlMs: config.mfaTokenTtlMs, audit });
  const limits = new ActionLimits({ db, clock, limits: config.actionLimits });
  const reauth = new Reauthentication({ db, log, passwords, twoFactor, throttle });
  const verifications = new EmailVerifications({ db, mail, log, recordEvent, limits });
  const accounts = new Accounts({ db, log, passwords, sessions, verifications, recordEvent, throttle, challenges, limits, audit });
  return {
    auditLog,
    accounts,
    signingKeys,
    sessions,
    challenges,
    verifications,
    twoFactor,
    passwordResets: new PasswordResets({ db, log, passwords, sessions, mail, throttle, clock, ttlMs: config.passwordResetTtlMs, audit }),
    settings: new AccountSettings({ db, log, passwords, sessions, twoFactor, reauth, mail, audit }),
    deactivations: new Deactivations({ db, log, sessions, reauth, mail, recordEvent, clock, eraseAfterMs: config.accountEraseAfterMs }),
    dataExports: new DataExports({
      db,
      log,
      dataKeys,
      mail,
      audit,
      limits,
      keys: createPeerClient(KeyService, { name: 'keys', url: config.dataExport.keysUrl }, runtime.meshTokens, { caller: 'identity' }),
      conversations: createPeerClient(ConversationService, { name: 'conversations', url: config.dataExport.conversationsUrl }, runtime.meshTokens, {
        caller: 'identity',
      }),
    }),
    organizations: new Organizations({ db, log, recordEvent, limits, audit }),
    members: new Members({ db, log, recordEvent, audit }),
    invitations: new Invitations({ db, log, mail, recordEvent, ttlMs: config.invitationTtlMs, limits, audit }),
    ownership: new Ownership({ db, log, recordEvent, audit }),
  };
}
