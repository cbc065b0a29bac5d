import { fileURLToPath } from 'node:url';
import { fromBinary } from '@bufbuild/protobuf';
import { servicePorts } from '@switchboard/contracts/components';
import { UsageRecordSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { FeedbackRecordedSchema, UserEmailVerifiedSchema } from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { consumeEvents, onEvent, onEventBatch } from '@switchboard/runtime/consumer';
import { workSubjects } from '@switchboard/runtime/nats';
import { startPeriodic } from '@switchboard/runtime/periodic';
import { runService } from '@switchboard/runtime/service';
import { consumeWork } from '@switchboard/runtime/work-consumer';
import { readBillingConfig } from './config.js';
import { prepareBilling, usageDurable } from './prepare.js';
import { registerRoutes } from './server.js';

await runService({
  name: 'billing',
  defaultPort: servicePorts.billing,
  migrationsDir: fileURLToPath(new URL('../migrations/', import.meta.url)),
  async prepare(runtime) {
    const config = readBillingConfig();
    return { config, ...prepareBilling(runtime, config) };
  },
  routes: (router, _runtime, handlers) => registerRoutes(router, handlers),
  background: (runtime, { config, leases, settlement, generations, freeCredits, autoTopups }) => [
    // Auto top-up charges (docs/api/billing.md#auto-top-up): at once after the crossing's commit, and a sweep retrying the unanswered.
    autoTopups.start(),
    ...consumeEvents(runtime, [
      // Ratings for the activity log (docs/api/generations.md#feedback), the latest of each generation.
      onEventBatch(FeedbackRecordedSchema, (events, trx) => generations.feedbackRecorded(trx, events)),
      // The free credit, once per user, when the email is verified (docs/api/billing.md#free-credit-and-the-sandbox).
      onEvent(UserEmailVerifiedSchema, (event, trx) => freeCredits.emailVerified(trx, event)),
    ]),
    // The data planes' usage records (docs/money-path.md#usage), a transaction per batch.
    consumeWork(runtime, {
      durable: usageDurable,
      subject: workSubjects(runtime.config.workSubjectPrefix).usage,
      decode: (msg) => fromBinary(UsageRecordSchema, msg.data),
      handle: (records, trx) => settlement.settle(records, trx),
    }),
    startPeriodic({
      name: 'balance lease pruning',
      everyMs: config.housekeepingIntervalMs,
      log: runtime.log,
      async run() {
        const deleted = await leases.prune();
        if (deleted > 0) runtime.log.info({ deleted }, 'pruned expired balance leases');
      },
    }),
  ],
});
