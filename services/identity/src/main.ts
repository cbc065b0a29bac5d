import { fileURLToPath } from 'node:url';
import { createMailer } from '@switchboard/runtime/mail';
import { runService } from '@switchboard/runtime/service';
import { Accounts } from './accounts.js';
import { EmailVerifications } from './email-verification.js';
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
    const accounts = new Accounts({
      db,
      log,
      passwords,
      sessions: new Sessions(signingKeys),
      verifications: new EmailVerifications(createMailer({ log }), log),
      recordEvent: runtime.recordEvent,
    });
    return { db, accounts, signingKeys };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
});
