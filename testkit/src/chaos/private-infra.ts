import path from 'node:path';
import { runEmbeddedPostgres } from '@switchboard/runtime/dev/embedded-postgres';
import { ensureDatabase, freePort, startNatsServer } from '@switchboard/runtime/infra';
import type { Logger } from '@switchboard/runtime/log';

/**
 * A Postgres of one chaos run alone (the embedded-postgres package's binaries, its own data dir
 * and port), so the run can take it away and bring it back without touching anyone else's.
 */
export class PrivatePostgres {
  private constructor(
    private readonly databaseDir: string,
    readonly port: number,
    private readonly log: Logger,
    private server: { stop(): Promise<void> } | undefined,
  ) {}

  static async start(dir: string, log: Logger): Promise<PrivatePostgres> {
    const databaseDir = path.join(dir, 'postgres');
    const port = await freePort();
    const postgres = new PrivatePostgres(databaseDir, port, log, undefined);
    await postgres.up();
    await ensureDatabase(postgres.url);
    return postgres;
  }

  get url(): string {
    return `postgres://postgres:postgres@127.0.0.1:${this.port}/switchboard`;
  }

  /** Starts the server on its data dir and port (again); resolves once it accepts connections. */
  async up(): Promise<void> {
    this.server = await runEmbeddedPostgres({ databaseDir: this.databaseDir, port: this.port, user: 'postgres', password: 'postgres', log: this.log });
  }

  /** A fast shutdown: every session is cut, nothing committed is lost. */
  async down(): Promise<void> {
    await this.server?.stop();
    this.server = undefined;
  }
}

/** A nats-server (JetStream, file store) of one chaos run alone, killed and started again on the same port and store. */
export class PrivateNats {
  private constructor(
    private readonly storeDir: string,
    private server: Awaited<ReturnType<typeof startNatsServer>> | undefined,
    readonly port: number,
  ) {}

  static async start(dir: string): Promise<PrivateNats> {
    const storeDir = path.join(dir, 'nats');
    const server = await startNatsServer(storeDir);
    return new PrivateNats(storeDir, server, server.port);
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  async up(): Promise<void> {
    this.server = await startNatsServer(this.storeDir, this.port);
  }

  /** `kill -9`: no flush, no goodbye to the clients (what JetStream acknowledged is on disk already). */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server || server.process.exitCode !== null || server.process.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => server.process.once('exit', () => resolve()));
    server.process.kill('SIGKILL');
    await exited;
  }

  async down(): Promise<void> {
    await this.server?.stop?.();
    this.server = undefined;
  }
}
