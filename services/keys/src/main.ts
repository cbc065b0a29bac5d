import { fileURLToPath } from 'node:url';
import { readDuration } from '@switchboard/runtime/config';
import { PgNotifier } from '@switchboard/runtime/pg-notifications';
import { runService } from '@switchboard/runtime/service';
import { AlertWebhooks } from './alert-webhooks.js';
import { KeyAuthorizer } from './authorization.js';
import { startEventConsumers } from './events.js';
import { startHousekeeping } from './housekeeping.js';
import { KeyStates } from './key-states.js';
import { alertSecretPurpose, Keys } from './keys.js';
import { Revocations } from './revocations.js';
import { type KeysHandlers, registerRoutes } from './server.js';
import { Spend } from './spend.js';
import { keyStateChannel } from './store/keys.js';

await runService<KeysHandlers & { states: KeyStates; notifier: PgNotifier }>({
  name: 'keys',
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  // Re-encrypted under the newest data key by `--rotate-data-key`.
  encryptedColumns: [{ table: 'api_keys', keyColumn: 'id', column: 'alert_signing_secret_encrypted', purpose: alertSecretPurpose }],
  async prepare(runtime) {
    const { db, log, recordEvent } = runtime;
    const { dataKeys } = runtime.config;
    const states = new KeyStates({ db, log });
    // The replica that commits a change applies it to its own key states at once.
    const notifier = new PgNotifier({
      db,
      channel: keyStateChannel,
      log,
      onCommit: (subjects) => {
        for (const subject of subjects) states.invalidate(subject);
      },
    });
    return {
      states,
      notifier,
      keys: new Keys({ db, log, dataKeys, recordEvent, notifier }),
      // RESERVATION_TTL: how long an unsettled reservation holds its amount (10m; tests shorten it).
      authorizer: new KeyAuthorizer({ db, log, states, reservationTtlMs: readDuration('RESERVATION_TTL', '10m') }),
      alertWebhooks: new AlertWebhooks({ db, dataKeys }),
    };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { states, notifier }) => [
    ...startEventConsumers(runtime, {
      spend: new Spend({ log: runtime.log, recordEvent: runtime.recordEvent, notifier }),
      revocations: new Revocations({ log: runtime.log, recordEvent: runtime.recordEvent, notifier }),
    }),
    startHousekeeping({ db: runtime.db, log: runtime.log, intervalMs: readDuration('HOUSEKEEPING_INTERVAL', '1h') }),
    { stop: () => states.stop() },
  ],
});
