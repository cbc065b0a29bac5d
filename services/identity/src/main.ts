import { fileURLToPath } from 'node:url';
import { createMailer } from '@switchboard/runtime/mail';
import { runService } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { EmailVerifications } from './email-verification.js';
import { PasswordHasher } from './passwords.js';
import { registerRoutes } from './server.js';
import { Sessions } from './sessions.js';
import { SigningKeys } from './signing-keys.js';

await runService({
  name: 'identity',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  routes(router, runtime) {
    const { db, log } = runtime;
    const passwords = new PasswordHasher();
    const signingKeys = new SigningKeys(db, log, runtime.config.meshSecret);
    // Start-up work, before the first call needs it: the dummy hash for unknown-email logins and
    // the signing key (generated on the first start). A failure is retried by the next call.
    passwords.prepare().catch((err) => log.error({ err }, 'could not compute the dummy password hash'));
    signingKeys.ready().catch((err) => log.error({ err }, 'could not load the signing key; retrying on the next call'));
    const accounts = new Accounts({
      db,
      log,
      passwords,
      sessions: new Sessions(signingKeys),
      verifications: new EmailVerifications(createMailer({ log }), log),
      recordEvent: runtime.recordEvent,
    });
    registerRoutes(router, { db, accounts, signingKeys });
  },
});
