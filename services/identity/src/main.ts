import { fileURLToPath } from 'node:url';
import { servicePorts } from '@switchboard/contracts/components';
import { runService } from '@switchboard/runtime/service';
import { type IdentityConfig, readIdentityConfig } from './config.js';
import { exportDocumentPurpose } from './data-exports.js';
import { startHousekeeping } from './erasure.js';
import { LoginThrottle } from './login-throttle.js';
import { prepareIdentity } from './prepare.js';
import { type IdentityHandlers, registerRoutes } from './server.js';
import { signingKeyPurpose } from './signing-keys.js';
import { totpSecretPurpose } from './two-factor.js';

await runService<{ config: IdentityConfig; handlers: IdentityHandlers }>({
  name: 'identity',
  defaultPort: servicePorts.identity,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [
    { table: 'signing_keys', keyColumn: 'kid', column: 'private_jwk_encrypted', purpose: signingKeyPurpose },
    { table: 'two_factor', keyColumn: 'user_id', column: 'secret_encrypted', purpose: totpSecretPurpose },
    { table: 'two_factor', keyColumn: 'user_id', column: 'pending_secret_encrypted', purpose: totpSecretPurpose },
    { table: 'data_exports', keyColumn: 'id', column: 'document_encrypted', purpose: exportDocumentPurpose },
  ],
  async prepare(runtime) {
    const config = readIdentityConfig();
    return { config, handlers: await prepareIdentity(runtime, config) };
  },
  routes: (router, _runtime, { handlers }) => registerRoutes(router, handlers),
  background: (runtime, { config, handlers }) => [
    handlers.dataExports.start(config.dataExport.intervalMs),
    startHousekeeping({
      db: runtime.db,
      log: runtime.log,
      // Stateless (its state is in Postgres): the job's own instance prunes the counters.
      throttle: new LoginThrottle({ db: runtime.db, log: runtime.log }),
      intervalMs: config.housekeepingIntervalMs,
    }),
    ...handlers.auditLog.start(runtime, config.housekeepingIntervalMs),
  ],
});
