/**
 * Webhooks benchmark: events published through `switchboard.webhooks.v1.EventService/PublishEvent`
 * (caller "data-plane") until the receiver has each one (the outbox row and the delivery rows in
 * one transaction, the dispatcher's claim, the signed HTTPS POST and the attempt recorded), against
 * the JetStream acknowledged-publish rate measured in the same run on the same nats-server.
 *
 *   npm run bench:webhooks   (BENCH_WEBHOOK_EVENTS, default 3000: events of the throughput run;
 *                             BENCH_WEBHOOK_WARMUP_EVENTS, default 500; BENCH_LATENCY_SECONDS,
 *                             default 10; BENCH_JETSTREAM_SECONDS, default 3: per JetStream run;
 *                             BENCH_WEBHOOK_ENDPOINT_CONCURRENCY, default 32; BENCH_NODE_FLAGS, e.g.
 *                             "--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the mesh)
 *
 * 1. Boots the mesh (its own database on the Postgres startMesh finds, dropped at the end when it
 *    is the local server; its own nats-server in a temp dir unless NATS_URL is set) with
 *    WEBHOOKS_ALLOW_PRIVATE_TARGETS=true, NODE_EXTRA_CA_CERTS of a throwaway certificate and
 *    WEBHOOK_ENDPOINT_CONCURRENCY raised; starts an HTTPS receiver in this process on 127.0.0.1
 *    that answers 204 at once; registers one user and one endpoint, https://localhost:<port>/,
 *    subscribed to agent.completed.
 * 2. JetStream baseline: a temporary file stream (BENCH_WEBHOOKS_<pid>, subjects
 *    bench.webhooks.<pid>.>, deleted after), 64 acknowledged publishes in flight of a message the
 *    size of an event envelope, before and after the webhook run (rate: their mean).
 * 3. Throughput: after a warm-up of BENCH_WEBHOOK_WARMUP_EVENTS events (all received), 64
 *    PublishEvent calls in flight for BENCH_WEBHOOK_EVENTS events; rate = events ÷ (first publish
 *    → last event received).
 * 4. Latency: open loop at half the measured rate for BENCH_LATENCY_SECONDS (each publish starts
 *    at its time whatever the others do): p50/p99 of publish start → arrival at the receiver.
 * 5. Checks: every event arrived (a second arrival of one is counted, not failed: deliveries are
 *    at least once), and every delivery row succeeded with no failed attempt.
 * 6. For reference (no target): the raw Postgres insert loop of `npm run bench` on the same
 *    database, the mesh idle, and the database's transactions and rows per event of the
 *    throughput run (pg_stat_database). CPU per event of each process (/proc/<pid>/stat) is in the
 *    report: it is what bounds the rate on a small host.
 *
 * Targets, reported PASS/FAIL (never a crash): webhook events/s ÷ JetStream publishes/s ≥ 0.30
 * and p99 event → receipt < 100 ms at half the measured rate. Exits non-zero only when a call
 * failed, an event was lost, a check failed or something crashed. Results: printed, and written to
 * bench/results/webhooks-<time>.json.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConnectError } from '@connectrpc/connect';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { EventService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { components, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, startNatsServer } from '@switchboard/runtime/infra';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import pg from 'pg';
import { type InsertLoopResult, runInsertLoop } from './measure/inserts.js';
import { percentile } from './measure/latency.js';
import { type CpuUse, cpuMeter, readMemory } from './measure/proc.js';
import { check, finishBench, fmt, machineFacts, runBench, type TargetCheck, table } from './report.js';
import { registerUser } from './scenarios.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));
const positiveInt = (name: string, fallback: number, max: number) => {
  const raw = process.env[name];
  return raw && /^[1-9]\d*$/.test(raw) ? Math.min(Number(raw), max) : fallback;
};
const concurrency = 64;
const events = positiveInt('BENCH_WEBHOOK_EVENTS', 3000, 1_000_000);
const warmupEvents = positiveInt('BENCH_WEBHOOK_WARMUP_EVENTS', 500, 100_000);
const latencySeconds = positiveInt('BENCH_LATENCY_SECONDS', 10, 600);
const jetstreamSeconds = positiveInt('BENCH_JETSTREAM_SECONDS', 3, 60);
const endpointConcurrency = positiveInt('BENCH_WEBHOOK_ENDPOINT_CONCURRENCY', 32, 1024);
const minRatio = 0.3;
/** The raw insert loop of `npm run bench` (bench/src/run.ts): a reference beside the target, not the target's baseline. */
const insertLoop = { concurrency: 16, maxInserts: 200_000, maxSeconds: 5, warmupInserts: 1_000 };
const maxP99Ms = 100;
/** A hard cap on the publishes of one JetStream run, whatever its duration. */
const maxJetstreamPublishes = 2_000_000;
/** How long the receiver may wait for the last events after the last publish answered before they count as lost. */
const receiptTimeoutMs = 60_000;
const callTimeoutMs = 10_000;

const progress = (message: string) => process.stderr.write(`[bench:webhooks] ${message}\n`);
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the receiver saw of one phase's events (indexed by the `bench_seq` of their data). */
interface Arrivals {
  at: Float64Array;
  received: number;
  duplicates: number;
}

/** An HTTPS receiver in this process that answers 204 at once and notes when each event arrived. */
async function startReceiver(key: string, cert: string) {
  const phases = new Map<string, Arrivals>();
  let requests = 0;
  let unknown = 0;
  const server = https.createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      res.writeHead(204).end();
      requests += 1;
      try {
        const data = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { bench_phase?: string; bench_seq?: number } }).data;
        const phase = phases.get(data?.bench_phase ?? '');
        const seq = data?.bench_seq;
        if (!phase || typeof seq !== 'number' || seq < 0 || seq >= phase.at.length) {
          unknown += 1;
          return;
        }
        if (phase.at[seq] > 0) phase.duplicates += 1;
        else {
          phase.at[seq] = at;
          phase.received += 1;
        }
      } catch {
        unknown += 1;
      }
    });
  });
  // Longer than the sender's idle sockets (30 s), so it never reuses a socket this side just closed.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    expect(phase: string, count: number): Arrivals {
      const arrivals = { at: new Float64Array(count), received: 0, duplicates: 0 };
      phases.set(phase, arrivals);
      return arrivals;
    },
    stats: () => ({ requests, unknown }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Waits until every event of a phase arrived; the time of the last arrival (or undefined after the timeout). */
async function allReceived(arrivals: Arrivals, timeoutMs: number): Promise<number | undefined> {
  const deadline = performance.now() + timeoutMs;
  while (arrivals.received < arrivals.at.length) {
    if (performance.now() > deadline) return undefined;
    await sleep(2);
  }
  return arrivals.at.reduce((latest, at) => Math.max(latest, at), 0);
}

interface PublishRun {
  ok: number;
  errors: number;
  firstProblem?: string;
  /** performance.now() of each publish's start, by sequence. */
  starts: Float64Array;
  /** Publish call → answer, ms, of the calls that succeeded. */
  answerLatencies: number[];
  firstStartAt: number;
  lastAnswerAt: number;
}

type Publish = (phase: string, seq: number) => Promise<unknown>;

/** `count` publishes, `inFlight` at a time, each starting when another answered. */
async function closedLoop(publish: Publish, phase: string, count: number, inFlight: number): Promise<PublishRun> {
  const run: PublishRun = { ok: 0, errors: 0, starts: new Float64Array(count), answerLatencies: [], firstStartAt: performance.now(), lastAnswerAt: 0 };
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const seq = next++;
      const started = performance.now();
      run.starts[seq] = started;
      try {
        await publish(phase, seq);
        run.ok += 1;
        run.answerLatencies.push(performance.now() - started);
      } catch (err) {
        run.errors += 1;
        run.firstProblem ??= ConnectError.from(err).message;
      }
      run.lastAnswerAt = performance.now();
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return run;
}

/** `count` publishes, one every 1000/`rate` ms from now, each started at its time whatever the others do. */
async function openLoop(publish: Publish, phase: string, count: number, rate: number): Promise<PublishRun & { maxLagMs: number; peakInFlight: number }> {
  const run = { ok: 0, errors: 0, starts: new Float64Array(count), answerLatencies: [] as number[], lastAnswerAt: 0, maxLagMs: 0, peakInFlight: 0 };
  const interval = 1000 / rate;
  const t0 = performance.now() + 20;
  const pending: Promise<void>[] = [];
  let inFlight = 0;
  let firstProblem: string | undefined;
  const fire = (seq: number) => {
    const started = performance.now();
    run.starts[seq] = started;
    run.maxLagMs = Math.max(run.maxLagMs, started - (t0 + seq * interval));
    inFlight += 1;
    run.peakInFlight = Math.max(run.peakInFlight, inFlight);
    pending.push(
      publish(phase, seq)
        .then(
          () => {
            run.ok += 1;
            run.answerLatencies.push(performance.now() - started);
          },
          (err: unknown) => {
            run.errors += 1;
            firstProblem ??= ConnectError.from(err).message;
          },
        )
        .finally(() => {
          inFlight -= 1;
          run.lastAnswerAt = performance.now();
        }),
    );
  };
  let seq = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (seq < count && t0 + seq * interval <= now) fire(seq++);
      if (seq >= count) return resolve();
      setTimeout(tick, Math.max(0, t0 + seq * interval - performance.now()));
    };
    setTimeout(tick, Math.max(0, t0 - performance.now()));
  });
  await Promise.all(pending);
  return { ...run, firstStartAt: t0, firstProblem };
}

interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

const latencyOf = (values: ArrayLike<number>): Latency => {
  const sorted = Float64Array.from(values).sort();
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100) };
};

/** Publish start → arrival at the receiver, of the events that arrived. */
function receiptLatency(run: PublishRun, arrivals: Arrivals): Latency {
  const values: number[] = [];
  for (let seq = 0; seq < arrivals.at.length; seq++) if (arrivals.at[seq] > 0 && run.starts[seq] > 0) values.push(arrivals.at[seq] - run.starts[seq]);
  return latencyOf(values);
}

/** CPU µs a group spent per event, from its % of one core over a run and the run's events/s. */
const microsPerEvent = (cpu: CpuUse, name: string, perSecond: number) =>
  cpu.processes[name] !== undefined && perSecond > 0 ? Math.round(((cpu.processes[name] / 100) * 1e6) / perSecond) : undefined;

interface JetstreamRun {
  published: number;
  errors: number;
  seconds: number;
  perSecond: number;
  latencyMs: Latency;
  cpu: CpuUse;
  firstProblem?: string;
}

/** Acknowledged publishes to a temporary file stream, `concurrency` in flight, for `seconds`. */
async function jetstreamRun(
  natsUrl: string,
  stream: string,
  subject: string,
  payload: string,
  seconds: number,
  watch: Record<string, Array<number | undefined>>,
): Promise<JetstreamRun> {
  const nc = await connect({ servers: natsUrl, timeout: 5000 });
  try {
    const js = jetstream(nc);
    const latencies: number[] = [];
    let published = 0;
    let errors = 0;
    let issued = 0;
    let firstProblem: string | undefined;
    // Half a second of warm-up on the fresh connection, not measured.
    const warmupUntil = performance.now() + 500;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < warmupUntil) await js.publish(subject, payload);
      }),
    );
    const stopMeter = cpuMeter(watch);
    const started = performance.now();
    const deadline = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (issued < maxJetstreamPublishes && performance.now() < deadline) {
          issued += 1;
          const callStarted = performance.now();
          try {
            const ack = await js.publish(subject, payload);
            if (ack.stream !== stream) throw new Error(`acknowledged by stream ${ack.stream}`);
            latencies.push(performance.now() - callStarted);
            published += 1;
          } catch (err) {
            errors += 1;
            firstProblem ??= (err as Error).message;
          }
        }
      }),
    );
    const elapsed = (performance.now() - started) / 1000;
    return {
      published,
      errors,
      seconds: round(elapsed),
      perSecond: Math.round(published / elapsed),
      latencyMs: latencyOf(latencies),
      cpu: stopMeter(),
      firstProblem,
    };
  } finally {
    await nc.close();
  }
}

/** The Postgres backends serving the bench database (their CPU is the database's share), when Postgres runs on this host. */
async function postgresBackends(db: pg.Client, databaseUrl: string): Promise<number[]> {
  if (!['127.0.0.1', 'localhost'].includes(new URL(databaseUrl).hostname)) return [];
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  return rows.map((row) => row.pid);
}

/**
 * How long after a load the database counters are read: a backend that goes idle flushes its
 * statistics at most once a second and, idle, within 10 s (PGSTAT_IDLE_INTERVAL).
 */
const statsFlushMs = 10_500;

interface DatabaseActivity {
  transactions: number;
  inserted: number;
  updated: number;
  deleted: number;
  walBytes: number;
}

/** The bench database's counters (pg_stat_database), and the cluster's WAL position (other databases' writes included). */
async function databaseActivity(db: pg.Client): Promise<DatabaseActivity> {
  const { rows } = await db.query<{ transactions: string; inserted: string; updated: string; deleted: string; wal: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS transactions, tup_inserted::text AS inserted, tup_updated::text AS updated,
            tup_deleted::text AS deleted, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  const row = rows[0];
  return {
    transactions: Number(row.transactions),
    inserted: Number(row.inserted),
    updated: Number(row.updated),
    deleted: Number(row.deleted),
    walBytes: Number(row.wal),
  };
}

/** The nats-server listening on `natsUrl`'s port, found by its command line (when it runs on this host). */
function natsServerPid(natsUrl: string, own?: number): number | undefined {
  if (own) return own;
  const port = new URL(natsUrl).port || '4222';
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!path.basename(args[0] ?? '').startsWith('nats-server')) continue;
      const portArg = args.findIndex((arg) => arg === '-p' || arg === '--port');
      if ((portArg >= 0 ? args[portArg + 1] : '4222') === port) return Number(entry);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return undefined;
}

async function main(): Promise<number> {
  const started = performance.now();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-webhooks-'));
  const database = `switchboard_bench_webhooks_${process.pid}_${Date.now().toString(36)}`;
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg().map((l) => round(l));
  const cleanups: Array<() => Promise<void>> = [];
  try {
    let natsSetup = 'NATS_URL';
    let ownNatsPid: number | undefined;
    if (!process.env.NATS_URL) {
      try {
        const nats = await startNatsServer(path.join(dataDir, 'nats'));
        cleanups.push(() => nats.stop!());
        process.env.NATS_URL = nats.url;
        ownNatsPid = nats.process.pid;
        natsSetup = 'own nats-server';
      } catch (err) {
        progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery`);
        natsSetup = 'discovered by startMesh';
      }
    }
    if (!process.env.DATABASE_URL) cleanups.push(() => dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined));

    const certificate = await createLocalCertificate(dataDir);
    const receiver = await startReceiver(certificate.key, certificate.cert);
    cleanups.push(() => receiver.close());

    const meshEnv = {
      LOG_LEVEL: 'warn',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
      NODE_EXTRA_CA_CERTS: certificate.certFile,
      WEBHOOK_ENDPOINT_CONCURRENCY: String(endpointConcurrency),
    };
    progress(
      `starting the mesh (${Object.entries(meshEnv)
        .map(([k, v]) => `${k}=${k === 'NODE_EXTRA_CA_CERTS' ? '<bench cert>' : v}`)
        .join(' ')})`,
    );
    const nodeFlags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);
    const mesh: Mesh = await startMesh({ dataDir, randomPorts: true, database, nodeFlags, env: meshEnv });
    cleanups.push(() => mesh.stop());
    const meshStartSeconds = round((performance.now() - started) / 1000, 1);

    const user = await registerUser(mesh.gatewayUrl, 'webhooks');
    const receiverUrl = `https://localhost:${receiver.port}/bench`;
    const created = await fetch(`${mesh.gatewayUrl}/v1/workspaces/${user.workspaceId}/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiverUrl, events: ['agent.completed'], description: 'bench' }),
      signal: AbortSignal.timeout(15_000),
    });
    const createdText = await created.text();
    if (created.status !== 201) throw new Error(`POST /v1/workspaces/…/webhooks answered ${created.status}: ${createdText.slice(0, 500)}`);
    const webhookId = (JSON.parse(createdText) as { webhook_id: string }).webhook_id;

    // The data plane's client: HTTP/2, Connect binary, a mesh token of caller "data-plane" (cached by MeshTokens).
    const eventsClient = createPeerClient(EventService, { name: 'webhooks', url: mesh.urls.webhooks }, new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET), {
      caller: 'data-plane',
    });
    const runId = randomBytes(4).toString('hex');
    const publish: Publish = (phase, seq) =>
      eventsClient.publishEvent(
        { workspaceId: user.workspaceId, type: 'agent.completed', data: { bench_run: runId, bench_phase: phase, bench_seq: seq, ok: true } },
        { timeoutMs: callTimeoutMs },
      );

    const db = new pg.Client({ connectionString: mesh.env.DATABASE_URL, connectionTimeoutMillis: 3000 });
    await db.connect();
    cleanups.push(() => db.end());
    const natsPid = natsServerPid(mesh.env.NATS_URL, ownNatsPid);

    // One event through, then the warm-up (its Postgres backends are then open, to be watched).
    const first = receiver.expect('first', 1);
    await publish('first', 0);
    if ((await allReceived(first, 15_000)) === undefined)
      throw new Error(`the first event did not reach the receiver within 15 s:\n${mesh.output('webhooks').split('\n').slice(-20).join('\n')}`);
    progress(`warm-up: ${warmupEvents} events, ${concurrency} in flight`);
    const warm = receiver.expect('warmup', warmupEvents);
    const warmRun = await closedLoop(publish, 'warmup', warmupEvents, concurrency);
    const warmEndedAt = await allReceived(warm, receiptTimeoutMs);
    if (warmEndedAt === undefined) throw new Error(`${warmupEvents - warm.received} warm-up events did not arrive within ${receiptTimeoutMs} ms`);

    const watch = {
      webhooks: [mesh.pid('webhooks')],
      postgres: await postgresBackends(db, mesh.env.DATABASE_URL),
      'nats-server': [natsPid],
      'bench (publisher + receiver)': [process.pid],
      // Their pollers and relays only: nothing of this load goes through them.
      'rest of the mesh': components.filter((component) => component !== 'webhooks').map((component) => mesh.pid(component)),
    };

    // JetStream baseline: a stream of its own, file storage like the events stream, deleted after.
    const stream = `BENCH_WEBHOOKS_${process.pid}`;
    const subjectPrefix = `bench.webhooks.${process.pid}`;
    const payload = JSON.stringify(
      buildEventPayload(
        `evt_${randomBytes(11).toString('base64url')}`,
        {
          type: 'agent.completed',
          workspaceId: user.workspaceId,
          data: { bench_run: runId, bench_phase: 'throughput', bench_seq: events - 1, ok: true },
        },
        'webhooks',
      ),
    );
    {
      const nc = await connect({ servers: mesh.env.NATS_URL, timeout: 5000 });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: stream, subjects: [`${subjectPrefix}.>`], retention: RetentionPolicy.Limits, storage: StorageType.File });
      await nc.close();
      cleanups.push(async () => {
        const conn = await connect({ servers: mesh.env.NATS_URL, timeout: 5000 });
        await (await jetstreamManager(conn)).streams.delete(stream).catch(() => false);
        await conn.close();
      });
    }
    const jetstreamWatch = { 'nats-server': [natsPid], 'bench (publisher + receiver)': [process.pid] };
    progress(`JetStream baseline 1/2: ${concurrency} acknowledged publishes in flight, ${jetstreamSeconds} s, ${Buffer.byteLength(payload)}-byte messages`);
    const jsBefore = await jetstreamRun(mesh.env.NATS_URL, stream, `${subjectPrefix}.event`, payload, jetstreamSeconds, jetstreamWatch);
    await sleep(warmEndedAt + statsFlushMs - performance.now());
    const statsBefore = await databaseActivity(db);

    progress(`throughput: ${events} events, ${concurrency} PublishEvent calls in flight`);
    const throughputArrivals = receiver.expect('throughput', events);
    const stopThroughputMeter = cpuMeter(watch);
    const throughputRun = await closedLoop(publish, 'throughput', events, concurrency);
    const lastThroughputArrival = await allReceived(throughputArrivals, receiptTimeoutMs);
    const throughputCpu = stopThroughputMeter();
    const throughputSeconds = ((lastThroughputArrival ?? performance.now()) - throughputRun.firstStartAt) / 1000;
    const webhookRate = Math.round(throughputArrivals.received / throughputSeconds);
    const publishRate = Math.round(throughputRun.ok / ((throughputRun.lastAnswerAt - throughputRun.firstStartAt) / 1000));

    progress(`JetStream baseline 2/2: ${jetstreamSeconds} s`);
    const jsAfter = await jetstreamRun(mesh.env.NATS_URL, stream, `${subjectPrefix}.event`, payload, jetstreamSeconds, jetstreamWatch);
    progress('reading the database counters of the throughput run once every backend has flushed them');
    await sleep((lastThroughputArrival ?? performance.now()) + statsFlushMs - performance.now());
    const statsAfter = await databaseActivity(db);
    const perEvent = (key: keyof DatabaseActivity) => round((statsAfter[key] - statsBefore[key]) / events, 2);
    const postgresPerEvent = {
      transactions: perEvent('transactions'),
      inserted: perEvent('inserted'),
      updated: perEvent('updated'),
      deleted: perEvent('deleted'),
      walBytes: perEvent('walBytes'),
    };
    const jetstreamRate = Math.round((jsBefore.perSecond + jsAfter.perSecond) / 2);
    const ratio = jetstreamRate > 0 ? round(webhookRate / jetstreamRate, 3) : 0;

    const latencyRate = Math.max(1, webhookRate / 2);
    const latencyCount = Math.max(1, Math.round(latencyRate * latencySeconds));
    progress(`latency: open loop at ${round(latencyRate, 1)} events/s (half the measured ${webhookRate}/s) for ${latencySeconds} s (${latencyCount} events)`);
    const latencyArrivals = receiver.expect('latency', latencyCount);
    const stopLatencyMeter = cpuMeter(watch);
    const latencyRun = await openLoop(publish, 'latency', latencyCount, latencyRate);
    const lastLatencyArrival = await allReceived(latencyArrivals, receiptTimeoutMs);
    const latencyCpu = stopLatencyMeter();
    const latencyRunSeconds = ((lastLatencyArrival ?? performance.now()) - latencyRun.firstStartAt) / 1000;
    const latency = receiptLatency(latencyRun, latencyArrivals);

    // The delivery log: every delivery of this endpoint succeeded, no attempt failed. The last
    // attempts are recorded just after their response arrived: the log gets a moment to settle.
    const expectedDeliveries = 1 + warmupEvents + events + latencyCount;
    let deliveries: Record<string, number> = {};
    for (const settleBy = performance.now() + 10_000; ; await sleep(50)) {
      const { rows } = await db.query<{ status: string; n: string }>(
        'SELECT status, count(*)::text AS n FROM webhooks.deliveries WHERE endpoint_id = $1 GROUP BY status',
        [webhookId],
      );
      deliveries = Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
      if ((deliveries.succeeded ?? 0) >= expectedDeliveries || performance.now() > settleBy) break;
    }
    const { rows: attemptRows } = await db.query<{ status: string; error_class: string | null; n: string }>(
      `SELECT a.status, a.error_class, count(*)::text AS n FROM webhooks.attempts a JOIN webhooks.deliveries d ON d.id = a.delivery_id
        WHERE d.endpoint_id = $1 GROUP BY a.status, a.error_class`,
      [webhookId],
    );
    const attempts = Object.fromEntries(attemptRows.map((row) => [`${row.status}${row.error_class ? `:${row.error_class}` : ''}`, Number(row.n)]));

    progress(`raw Postgres insert loop (${insertLoop.maxInserts} rows or ${insertLoop.maxSeconds} s, concurrency ${insertLoop.concurrency}), for reference`);
    const inserts: InsertLoopResult = await runInsertLoop({ databaseUrl: mesh.env.DATABASE_URL, ...insertLoop });
    const ratioToInserts = inserts.insertsPerSecond > 0 ? round(webhookRate / inserts.insertsPerSecond, 3) : 0;

    const errors: string[] = [];
    for (const [name, run] of [
      ['warm-up', warmRun],
      ['throughput', throughputRun],
      ['latency', latencyRun],
    ] as const) {
      if (run.errors > 0) errors.push(`${name}: ${run.errors} PublishEvent calls failed (first: ${run.firstProblem})`);
    }
    for (const [name, run] of [
      ['JetStream 1/2', jsBefore],
      ['JetStream 2/2', jsAfter],
    ] as const) {
      if (run.errors > 0) errors.push(`${name}: ${run.errors} publishes failed (first: ${run.firstProblem})`);
    }
    if (lastThroughputArrival === undefined)
      errors.push(
        `throughput: ${events - throughputArrivals.received} of ${events} events never reached the receiver (${receiptTimeoutMs} ms after the last answer)`,
      );
    if (lastLatencyArrival === undefined)
      errors.push(`latency: ${latencyCount - latencyArrivals.received} of ${latencyCount} events never reached the receiver`);
    if ((deliveries.succeeded ?? 0) !== expectedDeliveries || Object.keys(deliveries).length !== 1)
      errors.push(`the delivery log holds ${JSON.stringify(deliveries)}, expected ${expectedDeliveries} succeeded`);
    if (Object.keys(attempts).some((key) => key !== 'success')) errors.push(`failed attempts in the delivery log: ${JSON.stringify(attempts)}`);
    if (receiver.stats().unknown > 0) errors.push(`the receiver got ${receiver.stats().unknown} requests it could not attribute to an event of this run`);
    for (const component of components) {
      if (!readMemory(mesh.pid(component))) errors.push(`${component} exited during the bench:\n${mesh.output(component).split('\n').slice(-20).join('\n')}`);
    }

    const targets: TargetCheck[] = [
      check('webhook events/s (PublishEvent → receiver 2xx) ÷ JetStream acknowledged publishes/s', ratio, '>=', minRatio, 'ratio'),
      check(`p99 event → receipt (ms) at half the measured rate (${round(latencyRate, 1)}/s)`, latency.p99, '<', maxP99Ms, 'ms'),
    ];
    const duplicates = throughputArrivals.duplicates + latencyArrivals.duplicates + warm.duplicates;

    const throughput = {
      events,
      seconds: round(throughputSeconds),
      eventsPerSecond: webhookRate,
      publishAnsweredPerSecond: publishRate,
      publishLatencyMs: latencyOf(throughputRun.answerLatencies),
      receiptLatencyMs: receiptLatency(throughputRun, throughputArrivals),
      cpu: throughputCpu,
      cpuMicrosPerEvent: Object.fromEntries(Object.keys(watch).map((name) => [name, microsPerEvent(throughputCpu, name, webhookRate)])),
    };
    const latencyReport = {
      targetRate: round(latencyRate, 1),
      events: latencyCount,
      achievedRate: round(latencyArrivals.received / latencyRunSeconds, 1),
      seconds: round(latencyRunSeconds),
      maxPacingLagMs: round(latencyRun.maxLagMs),
      peakPublishesInFlight: latencyRun.peakInFlight,
      publishLatencyMs: latencyOf(latencyRun.answerLatencies),
      receiptLatencyMs: latency,
      cpu: latencyCpu,
      cpuMicrosPerEvent: Object.fromEntries(Object.keys(watch).map((name) => [name, microsPerEvent(latencyCpu, name, latencyRate)])),
    };
    const report = {
      at,
      machine: machineFacts(loadAverageAtStart),
      settings: {
        concurrency,
        events,
        warmupEvents,
        latencySeconds,
        jetstreamSeconds,
        jetstreamMessageBytes: Buffer.byteLength(payload),
        mesh: { ...meshEnv, NODE_EXTRA_CA_CERTS: '<bench certificate>' },
        receiver: receiverUrl,
        nats: natsSetup,
      },
      meshStartSeconds,
      jetstream: { before: jsBefore, after: jsAfter, perSecond: jetstreamRate },
      throughput,
      ratio,
      postgresInserts: inserts,
      ratioToInserts,
      latency: latencyReport,
      postgresPerEvent,
      deliveries,
      attempts,
      duplicates,
      receiverRequests: receiver.stats().requests,
      targets,
      errors,
      totalSeconds: 0,
    };

    const out: string[] = [];
    out.push(`Switchboard bench:webhooks  ${at}`);
    out.push(
      `  node ${process.version}, ${report.machine.cpus} CPU (${report.machine.model}), load avg at start ${loadAverageAtStart.join(' ')}, at end ${report.machine.loadAverageAtEnd.join(' ')}; the publisher and the receiver are this process, on the same cores`,
    );
    out.push(
      `  mesh ready in ${meshStartSeconds} s; NATS: ${natsSetup}; mesh settings: WEBHOOKS_ALLOW_PRIVATE_TARGETS=true, NODE_EXTRA_CA_CERTS=<bench certificate>, WEBHOOK_ENDPOINT_CONCURRENCY=${endpointConcurrency}, LOG_LEVEL=warn (the rest default)`,
    );
    out.push(
      `  one endpoint ${receiverUrl} (agent.completed), answering 204 at once; PublishEvent over one h2c connection (Connect binary, caller data-plane)`,
    );
    out.push('');
    out.push(
      `Throughput: ${events} events after ${warmupEvents} warm-up, ${concurrency} PublishEvent calls in flight; JetStream: ${concurrency} publishes in flight, ${jetstreamSeconds} s before and after`,
    );
    const rateRow = (name: string, perSecond: number, answer: Latency | undefined, receipt: Latency | undefined, ratioCell: string) => [
      name,
      fmt(perSecond),
      fmt(answer?.p50, 1),
      fmt(answer?.p99, 1),
      fmt(receipt?.p50, 1),
      fmt(receipt?.p99, 1),
      ratioCell,
    ];
    out.push(
      table(
        ['load', 'per s', 'answer p50 ms', 'answer p99 ms', 'receipt p50 ms', 'receipt p99 ms', '÷ JetStream'],
        [
          rateRow('webhooks: PublishEvent → receiver 2xx (events)', webhookRate, throughput.publishLatencyMs, throughput.receiptLatencyMs, ratio.toFixed(2)),
          rateRow('  PublishEvent answered (calls)', publishRate, undefined, undefined, '-'),
          rateRow(`JetStream acknowledged publish, ${Buffer.byteLength(payload)} B (before)`, jsBefore.perSecond, jsBefore.latencyMs, undefined, '-'),
          rateRow(`JetStream acknowledged publish, ${Buffer.byteLength(payload)} B (after)`, jsAfter.perSecond, jsAfter.latencyMs, undefined, '-'),
          rateRow('JetStream (mean)', jetstreamRate, undefined, undefined, '1.00'),
          [
            `reference: raw Postgres INSERT (autocommit, ${inserts.concurrency} at a time, mesh idle)`,
            fmt(inserts.insertsPerSecond),
            fmt(inserts.latencyMs.p50, 1),
            fmt(inserts.latencyMs.p99, 1),
            '-',
            '-',
            '-',
          ],
        ],
      ),
    );
    out.push(
      `  (info) webhook events/s ÷ raw Postgres inserts/s: ${ratioToInserts.toFixed(2)}; Postgres ${inserts.server.version}, synchronous_commit=${inserts.server.synchronousCommit}`,
    );
    out.push(`  receipt: publish start → arrival at the receiver (at ${concurrency} in flight it includes the queue behind the dispatcher)`);
    out.push('');
    out.push(
      `Latency: open loop at ${round(latencyRate, 1)} events/s (half of ${webhookRate}/s) for ${latencySeconds} s, ${latencyCount} events; achieved ${latencyReport.achievedRate}/s, max pacing lag ${fmt(latencyRun.maxLagMs, 1)} ms, peak ${latencyRun.peakInFlight} calls in flight`,
    );
    out.push(
      table(
        ['measure', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
        [
          ['event → receipt (publish start → receiver)', fmt(latency.p50, 1), fmt(latency.p90, 1), fmt(latency.p99, 1), fmt(latency.max, 1)],
          [
            'PublishEvent answer',
            fmt(latencyReport.publishLatencyMs.p50, 1),
            fmt(latencyReport.publishLatencyMs.p90, 1),
            fmt(latencyReport.publishLatencyMs.p99, 1),
            fmt(latencyReport.publishLatencyMs.max, 1),
          ],
        ],
      ),
    );
    out.push('');
    out.push(
      'CPU (% of one core; µs per event = CPU time ÷ events; postgres = the client backends of the bench database; host = % of all cores, every process on it)',
    );
    const names = Object.keys(watch);
    const cpuRow = (name: string, cpu: CpuUse, perSecond: number) => [
      name,
      ...names.flatMap((n) => [fmt(cpu.processes[n]), fmt(microsPerEvent(cpu, n, perSecond))]),
      fmt(cpu.hostBusyPercent),
    ];
    out.push(
      table(
        ['run', ...names.flatMap((n) => [`${n} %`, 'µs/ev']), 'host%'],
        [
          cpuRow(`throughput (${webhookRate}/s)`, throughputCpu, webhookRate),
          cpuRow(`latency (${round(latencyRate, 1)}/s)`, latencyCpu, latencyRate),
          cpuRow(`JetStream before (${jsBefore.perSecond}/s, µs per publish)`, jsBefore.cpu, jsBefore.perSecond),
          cpuRow(`JetStream after (${jsAfter.perSecond}/s, µs per publish)`, jsAfter.cpu, jsAfter.perSecond),
        ],
      ),
    );
    out.push(
      `  Postgres per event of the throughput run (pg_stat_database, read ${statsFlushMs / 1000} s after the load): ${postgresPerEvent.transactions} transactions, ${postgresPerEvent.inserted} rows inserted, ${postgresPerEvent.updated} updated, ${postgresPerEvent.deleted} deleted, ${Math.round(postgresPerEvent.walBytes)} WAL bytes (pollers of the idle services included)`,
    );
    out.push('');
    out.push(
      `Delivery log of the endpoint: ${JSON.stringify(deliveries)}; attempts ${JSON.stringify(attempts)}; the receiver got ${receiver.stats().requests} requests, ${duplicates} second arrivals of an event`,
    );
    return finishBench({ name: 'webhooks', lines: out, targets, errors, startedAt: started, at, resultsDir, report });
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => progress(`cleanup: ${(err as Error).message}`));
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBench(main);
