import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { readEventsConfig } from '@switchboard/runtime/config';
import { type Component, components, type Mesh, type MeshOptions, startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase, startNatsServer } from '@switchboard/runtime/infra';
import { relaxedRateLimits } from '@switchboard/testkit/rate-limits';
import { finishBench, resultsDir, type TargetCheck } from '../report.js';
import { round } from './latency.js';
import { readMemory } from './proc.js';
import { benchNodeFlags } from './settings.js';

/**
 * One bench run's surroundings: its start, a temp dir, a database name of its own, and what to
 * undo at the end (last in, first out, then the temp dir). `name` is the bench's (`keys` for
 * `npm run bench:keys`); none for `npm run bench`.
 */
export class BenchSession {
  /** performance.now() at the start. */
  readonly startedAt = performance.now();
  readonly at = new Date().toISOString();
  readonly loadAverageAtStart = os.loadavg().map((l) => round(l));
  readonly database: string;
  private readonly cleanups: Array<{ name: string; run: () => Promise<void> }> = [];
  private closed?: Promise<void>;

  private constructor(
    readonly name: string | undefined,
    readonly dataDir: string,
  ) {
    this.database = `switchboard_bench_${name ? `${name.replaceAll('-', '_')}_` : ''}${process.pid}_${Date.now().toString(36)}`;
  }

  static async open(name?: string): Promise<BenchSession> {
    return new BenchSession(name, await mkdtemp(path.join(os.tmpdir(), `switchboard-bench-${name ? `${name}-` : ''}`)));
  }

  progress(message: string): void {
    process.stderr.write(`[bench${this.name ? `:${this.name}` : ''}] ${message}\n`);
  }

  /** Registers something to undo at the end. */
  defer(name: string, run: () => Promise<void>): void {
    this.cleanups.push({ name, run });
  }

  /** The end of the bench (report.ts finishBench): its targets, errors and time printed, its JSON under bench/results/. */
  finish(input: { lines: string[]; targets: TargetCheck[]; errors: string[]; report: { totalSeconds?: number } }): Promise<number> {
    return finishBench({ name: this.name ?? 'bench', ...input, startedAt: this.startedAt, at: this.at, resultsDir });
  }

  /** Undoes everything (once, however often it is called); a failure goes to `onError` and the rest still runs. */
  close(onError = (name: string, err: Error) => this.progress(`cleanup (${name}): ${err.message}`)): Promise<void> {
    this.closed ??= (async () => {
      for (const { name, run } of this.cleanups.reverse()) await run().catch((err: unknown) => onError(name, err as Error));
      await rm(this.dataDir, { recursive: true, force: true });
    })();
    return this.closed;
  }
}

/** Opens a session, runs the bench's body in it, and closes it whatever happens. */
export async function inSession(name: string, body: (session: BenchSession) => Promise<number>): Promise<number> {
  const session = await BenchSession.open(name);
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

export interface BenchNats {
  /** The nats-server this bench started, when it did. */
  pid?: number;
  /** How NATS was found, for the report. */
  setup: string;
}

/**
 * A nats-server of the bench's own in its temp dir, unless NATS_URL is set, so no other mesh's
 * consumers take its events. Without the binary the mesh finds one (127.0.0.1:4222 or a
 * container); `fallback` then says what the bench does about it.
 */
export async function startOwnNats(session: BenchSession, fallback = { note: '', setup: '' }): Promise<BenchNats> {
  if (process.env.NATS_URL) return { setup: 'NATS_URL' };
  try {
    const nats = await startNatsServer(path.join(session.dataDir, 'nats'));
    session.defer('nats-server', () => nats.stop!());
    process.env.NATS_URL = nats.url;
    return { pid: nats.process.pid, setup: 'own nats-server' };
  } catch (err) {
    session.progress(`could not start a nats-server of its own (${(err as Error).message}); using the mesh's discovery${fallback.note}`);
    return { setup: `discovered by startMesh${fallback.setup}` };
  }
}

/**
 * Boots the mesh on free ports with the session's database (dropped at the end when it is the
 * local server: startMesh creates it there, runtime/src/infra.ts) and BENCH_NODE_FLAGS, stopped
 * at the end; `meshStartSeconds` counts from the session's start.
 */
export async function startBenchMesh(
  session: BenchSession,
  options: Pick<MeshOptions, 'env' | 'onLine'> & { nodeFlags?: string[] } = {},
): Promise<{ mesh: Mesh; meshStartSeconds: number }> {
  if (!process.env.DATABASE_URL)
    session.defer('bench database', () => dropDatabase(`postgres://postgres@127.0.0.1:5432/${session.database}`).catch(() => undefined));
  const mesh = await startMesh({
    dataDir: session.dataDir,
    randomPorts: true,
    database: session.database,
    nodeFlags: options.nodeFlags ?? benchNodeFlags(),
    // Top-ups through the sandbox provider, as under npm start (docs/api/billing.md#free-credit-and-the-sandbox).
    // A load sends far more than the REST rate limits allow one principal or address (docs/conventions.md#rate-limits).
    env: { BILLING_SANDBOX: 'true', ...relaxedRateLimits, ...(options.env ?? { LOG_LEVEL: 'warn' }) },
    onLine: options.onLine,
  });
  session.defer('mesh', () => mesh.stop());
  // Its namespace follows the session's database (startMesh): its streams go with the database.
  if (!process.env.DATABASE_URL) session.defer("the mesh's streams", () => deleteStreams({ ...process.env, ...mesh.env }));
  return { mesh, meshStartSeconds: round((performance.now() - session.startedAt) / 1000, 1) };
}

/** Deletes the events and work streams the settings `env` name (best effort: NATS may be gone). */
async function deleteStreams(env: Record<string, string | undefined>): Promise<void> {
  const { natsUrl, eventsStream, workStream } = readEventsConfig(env);
  try {
    const nc = await connect({ servers: natsUrl, timeout: 2000 });
    const jsm = await jetstreamManager(nc);
    for (const stream of [eventsStream, workStream]) await jsm.streams.delete(stream).catch(() => false);
    await nc.close();
  } catch {
    // NATS gone (its own server stopped first): nothing to delete.
  }
}

/** A report of each of `which` components that is no longer running (a crash during the bench), with its last lines. */
export function exitedComponents(mesh: Mesh, which: readonly Component[] = components): string[] {
  return which
    .filter((component) => !readMemory(mesh.pid(component)))
    .map((component) => `${component} exited during the bench:\n${mesh.output(component).split('\n').slice(-20).join('\n')}`);
}
