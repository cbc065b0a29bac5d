import type { DescMessage } from '@bufbuild/protobuf';
import type { ConnectRouter } from '@connectrpc/connect';
import { AuditTrail } from './audit.js';
import { type CommonConfig, readCommonConfig, readInt, readMeshKeyring } from './config.js';
import { type EncryptedColumn, rotateDataKey } from './data-key-rotation.js';
import { createDb, type Knex, migrate, watchDatabasePool } from './db.js';
import { createLogger, type Logger } from './log.js';
import { MeshTokens } from './mesh-token.js';
import { Metrics, startMetricsServer } from './metrics.js';
import { connectNats, ensureEventStream, type NatsConnection } from './nats.js';
import { type RecordEventInput, recordEvent, recordEvents, startOutboxRelay, watchOutbox } from './outbox.js';
import { setPolicyAuditTrail, setPolicyLogger } from './policy.js';
import { startRpcServer } from './server.js';
import { stopGracefully } from './shutdown.js';
import { keepByteOrderMarks } from './text-encoding.js';

/** What a service's wiring gets: its config, log, database, NATS and event writer. */
export interface ServiceRuntime {
  name: string;
  config: CommonConfig;
  log: Logger;
  db: Knex;
  /** Resolves once NATS is reachable (services start without it; events wait in the outbox). */
  nats: Promise<NatsConnection>;
  meshTokens: MeshTokens;
  /** The service's Prometheus metrics: RPCs, pool and outbox are counted already; a service adds its own. */
  metrics: Metrics;
  /**
   * Writes an event of the type `schema` names in the caller's transaction (outbox); it is
   * published after commit (docs/events.md, "How events are typed").
   */
  recordEvent: EventWriter;
  /** Writes a batch of events of the type `schema` names in the caller's transaction, in one statement. */
  recordEvents: EventsWriter;
  /** Writes audit records (docs/api/audit.md) in the caller's transaction, or alone for a refusal. */
  audit: AuditTrail;
}

/** Writes an event in the caller's transaction (the outbox): what domain modules get as a dep. */
export type EventWriter = <Desc extends DescMessage>(trx: Knex.Transaction, schema: Desc, event: RecordEventInput<Desc>) => Promise<string>;

/** Writes events of one type in the caller's transaction, in one statement (a batch consumer's). */
export type EventsWriter = <Desc extends DescMessage>(trx: Knex.Transaction, schema: Desc, events: RecordEventInput<Desc>[]) => Promise<string[]>;

/** Something a service runs beside its RPC server (a relay, a consumer, a sweeper). */
export interface BackgroundTask {
  stop(): Promise<void>;
}

export interface ServiceDefinition<Prepared = void> {
  /** The service's name: its schema, its mesh-token audience, its logs and metrics. */
  name: string;
  /** The port it serves on unless PORT says otherwise (contracts/src/components.ts lists them). */
  defaultPort: number;
  /** Directory of the compiled migrations (dist/migrations). */
  migrationsDir: string;
  /** Work that must finish before the service answers (loading keys, building its domain). */
  prepare?(runtime: ServiceRuntime): Promise<Prepared>;
  routes(router: ConnectRouter, runtime: ServiceRuntime, prepared: Prepared): void;
  /** Consumers and jobs, started after migrations; stopped after the RPC server. */
  background?(runtime: ServiceRuntime, prepared: Prepared): BackgroundTask[];
  /** The columns that hold ciphertexts under the data keys, for `--rotate-data-key`. */
  encryptedColumns?: EncryptedColumn[];
}

/**
 * The whole life of a service process: config, migrations, RPC server, outbox relay and
 * background tasks, and a graceful stop on SIGTERM/SIGINT.
 */
export async function runService<Prepared = void>(definition: ServiceDefinition<Prepared>): Promise<void> {
  const { name } = definition;
  const log = createLogger(name);
  setPolicyLogger(log);
  keepByteOrderMarks();
  try {
    const config = readCommonConfig();
    const meshKeyring = readMeshKeyring(name);
    const port = readInt('PORT', definition.defaultPort);
    const db = createDb(config.databaseUrl, name);
    if (process.argv.includes('--migrate')) {
      // The init container of each service Deployment: a new version serves only once its schema
      // is migrated; a failed migration holds its rollout back while the old pods keep serving.
      const applied = await migrate(db, name, definition.migrationsDir).catch((err) => {
        log.fatal({ err, schema: name }, `${name} migrations failed`);
        process.exit(1);
      });
      log.info({ schema: name, applied }, `${name} migrations done`);
      await db.destroy();
      process.exit(0);
    }
    await migrate(db, name, definition.migrationsDir);
    if (process.argv.includes('--rotate-data-key')) {
      // A one-off run (a Kubernetes Job, `npm run rotate-data-key`): re-encrypt, report, exit.
      const results = await rotateDataKey({ db, ring: config.dataKeys, columns: definition.encryptedColumns ?? [], legacyMeshSecret: config.meshSecret, log });
      log.info({ key_id: config.dataKeys.currentKeyId, results }, 'data key rotation finished');
      await db.destroy();
      process.exit(0);
    }
    // Refused NATS credentials make the service unready (docs/operations.md#nats-credentials): its events could not leave.
    let natsRefused = false;
    const natsAccess = {
      seed: config.natsSeed,
      onRefused: (refused: boolean) => {
        natsRefused = refused;
      },
    };
    const nats = connectNats(config.natsUrl, name, log, natsAccess).then(async (nc) => {
      // JetStream may not be ready yet (a server still starting): keep trying, events wait in the outbox.
      for (let attempt = 1; ; attempt++) {
        try {
          await ensureEventStream(nc, config.eventsStream, config.eventsSubjectPrefix);
          return nc;
        } catch (err) {
          if (attempt === 1 || attempt % 30 === 0) log.warn({ err: (err as Error).message, attempt }, 'event stream not ready; retrying');
          await new Promise((resolve) => setTimeout(resolve, Math.min(200 * attempt, 2000)));
        }
      }
    });
    nats.catch((err) => log.error({ err }, 'nats unavailable'));
    const metrics = new Metrics(name);
    watchDatabasePool(metrics, db);
    watchOutbox(metrics, db, name);
    const writeEvent: EventWriter = (trx, schema, event) => recordEvent(trx, schema, event, { producer: name, subjectPrefix: config.eventsSubjectPrefix });
    const auditTrail = new AuditTrail({ log, db, recordEvent: writeEvent });
    setPolicyAuditTrail(auditTrail);
    const runtime: ServiceRuntime = {
      name,
      config,
      log,
      db,
      nats,
      metrics,
      meshTokens: new MeshTokens(meshKeyring),
      recordEvent: writeEvent,
      recordEvents: (trx, schema, events) => recordEvents(trx, schema, events, { producer: name, subjectPrefix: config.eventsSubjectPrefix }),
      audit: auditTrail,
    };
    const prepared = (await definition.prepare?.(runtime)) as Prepared;
    const server = await startRpcServer({
      name,
      port,
      host: process.env.HOST,
      routes: (router) => definition.routes(router, runtime, prepared),
      meshTokens: runtime.meshTokens,
      log,
      metrics,
      isHealthy: async () => {
        await db.raw('select 1').timeout(1000);
        return !natsRefused;
      },
    });
    const metricsPort = readInt('METRICS_PORT', 0);
    const metricsServer = metricsPort > 0 ? await startMetricsServer({ metrics, port: metricsPort, host: process.env.HOST, log }) : undefined;
    const tasks: BackgroundTask[] = [startOutboxRelay({ db, schema: name, nats, log, metrics }), ...(definition.background?.(runtime, prepared) ?? [])];

    stopGracefully(log, {
      unready: () => server.unready(),
      drain: (drainTimeoutMs) => server.close(drainTimeoutMs),
      async release() {
        await Promise.allSettled(tasks.map((task) => task.stop()));
        await metricsServer?.close();
        // NATS may never have come up: do not wait for it forever.
        await Promise.race([nats.then((nc) => nc.drain()), new Promise((resolve) => setTimeout(resolve, 2000))]).catch(() => undefined);
        await db.destroy();
      },
    });
  } catch (err) {
    log.fatal({ err }, `${name} failed to start`);
    process.exit(1);
  }
}
