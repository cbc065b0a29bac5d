import { PgNotifier } from '@switchboard/runtime/pg-notifications';
import type { ServiceRuntime } from '@switchboard/runtime/service';
import { AlertWebhooks } from './alert-webhooks.js';
import { KeyAuthorizer } from './authorization.js';
import { CapLeases } from './cap-leases.js';
import type { KeysConfig } from './config.js';
import { KeyStateFeed } from './key-state-feed.js';
import { KeyStates } from './key-states.js';
import { Keys } from './keys.js';
import type { KeysHandlers } from './server.js';
import { prepareBudgets } from './spend-limit-routes.js';
import { keyStateChannel } from './store/keys.js';

/** What the keys handlers are built from: the parts of the service runtime they use. */
export type KeysRuntime = Pick<ServiceRuntime, 'db' | 'log' | 'recordEvent' | 'audit'> & { config: Pick<ServiceRuntime['config'], 'dataKeys'> };

/** The domain modules behind the keys handlers, as main.ts (and the in-process test) builds them. */
export function prepareKeys(runtime: KeysRuntime, config: KeysConfig): KeysHandlers & { states: KeyStates; notifier: PgNotifier } {
  const { db, log, recordEvent, audit } = runtime;
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
    keys: new Keys({ db, log, dataKeys, recordEvent, audit, notifier }),
    authorizer: new KeyAuthorizer({ db, log, states, reservationTtlMs: config.reservationTtlMs }),
    alertWebhooks: new AlertWebhooks({ db, dataKeys }),
    stateFeed: new KeyStateFeed({ db }),
    capLeases: new CapLeases({ db, leaseTtlMs: config.leaseTtlMs }),
    budgets: prepareBudgets(db, audit, config),
  };
}
