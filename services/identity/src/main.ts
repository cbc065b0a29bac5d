import { fileURLToPath } from 'node:url';
import { readDuration } from '@switchboard/runtime/config';
import { createMailer } from '@switchboard/runtime/mail';
import { runService } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { EmailVerifications } from './email-verification.js';
import { defaultInvitationTtl, Invitations } from './invitations.js';
import { Members } from './members.js';
import { Organizations } from './organizations.js';
import { Ownership } from './ownership.js';
import { PasswordHasher } from './passwords.js';
import { registerRoutes, type IdentityHandlers } from './server.js';
import { Sessions } from './sessions.js';
import { SigningKeys } from './signing-keys.js';

await runService<IdentityHandlers>({
  name: 'identity',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Before the first call: the dummy hash for unknown-email logins, and the signing key
  // (generated on the very first start).
  async prepare(runtime) {
    const { db, log } = runtime;
    const passwords = new PasswordHasher();
    const signingKeys = new SigningKeys(db, log, runtime.config.meshSecret);
    await Promise.all([passwords.prepare(), signingKeys.ready()]);
    const mailer = createMailer({ log });
    const accounts = new Accounts({
      db,
      log,
      passwords,
      sessions: new Sessions(signingKeys),
      verifications: new EmailVerifications(mailer, log),
      recordEvent: runtime.recordEvent,
    });
    const recordEvent = runtime.recordEvent;
    // INVITATION_TTL: how long an invitation stays valid (7d; tests shorten it).
    const invitationTtlMs = readDuration('INVITATION_TTL', defaultInvitationTtl);
    return {
      db,
      accounts,
      signingKeys,
      organizations: new Organizations({ db, log, recordEvent }),
      members: new Members({ db, log, recordEvent }),
      invitations: new Invitations({ db, log, mailer, recordEvent, ttlMs: invitationTtlMs }),
      ownership: new Ownership({ db, log, recordEvent }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
