import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { type Component, type Mesh, startMesh } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { createLogger } from '@switchboard/runtime/log';
import { relaxedRateLimits } from '../rate-limits.js';
import { WebhookReceiver } from '../webhook-receiver.js';
import { chaosModel } from './mixed-load.js';
import { PrivateNats, PrivatePostgres } from './private-infra.js';

/** Everything a chaos run starts: its own Postgres, NATS, fake upstream, webhook receiver and mesh. */
export interface ChaosWorld {
  dir: string;
  postgres: PrivatePostgres;
  nats: PrivateNats;
  upstream: OpenAiUpstream;
  receiver: WebhookReceiver;
  mesh: Mesh;
  /** The path of the receiver the load's webhook endpoint points at. */
  webhookUrl: string;
  /** Credit a new workspace opens with (SANDBOX_OPENING_CREDIT_USD, the sandbox on), for the balance invariant. */
  openingCreditUsd: string;
  stop(): Promise<void>;
}

export const webhookPath = '/chaos';

/**
 * Starts a chaos world in a fresh temp dir. `env` is added to every component's (e.g.
 * SHUTDOWN_DELAY); `onComponentExit` hears of a component that died without being told to.
 */
export async function startChaosWorld(
  options: {
    env?: Record<string, string>;
    onComponentExit?: (component: Component, code: number | string | null, lastLines: string[]) => void;
    /** The credit a new workspace starts with (default 100.00): small, to run budgets out. */
    openingCreditUsd?: string;
  } = {},
): Promise<ChaosWorld> {
  const log = createLogger('chaos', 'warn');
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-chaos-'));
  // As root the embedded Postgres runs as the postgres user: its data stays under this dir (and
  // goes with it) only if that user may enter it.
  await chmod(dir, 0o755);
  const started: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of started.reverse()) await stop().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const certificate = await createLocalCertificate(dir);
    const upstream = await OpenAiUpstream.start();
    started.push(() => upstream.close());
    const receiver = await WebhookReceiver.start(certificate);
    started.push(() => receiver.close());
    const postgres = await PrivatePostgres.start(dir, log);
    started.push(() => postgres.down());
    const nats = await PrivateNats.start(dir);
    started.push(() => nats.down());
    const catalogFile = path.join(dir, 'models.json');
    await writeFile(
      catalogFile,
      JSON.stringify({
        regions: { overseas: { base_url: upstream.baseUrl, api_key_env: 'CHAOS_UPSTREAM_KEY' } },
        models: [{ id: chaosModel, region: 'overseas', tiers: [], input_usd_per_1m: '1.00', output_usd_per_1m: '2.00' }],
      }),
    );
    const openingCreditUsd = options.openingCreditUsd ?? '100.00';
    const mesh = await startMesh({
      dataDir: path.join(dir, 'mesh'),
      randomPorts: true,
      onComponentExit: options.onComponentExit,
      env: {
        DATABASE_URL: postgres.url,
        NATS_URL: nats.url,
        LOG_LEVEL: 'warn',
        SWITCHBOARD_MODELS_FILE: catalogFile,
        CHAOS_UPSTREAM_KEY: 'sk-chaos',
        // Every workspace opens funded (no email is verified, so no free credit comes on top).
        BILLING_SANDBOX: 'true',
        SANDBOX_OPENING_CREDIT_USD: openingCreditUsd,
        // The load registers its sign-in users from one address.
        REGISTRATIONS_PER_IP_PER_HOUR: '100000',
        ...relaxedRateLimits,
        WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
        NODE_EXTRA_CA_CERTS: certificate.certFile,
        // Deliveries retried within seconds, so a run waits for them no longer than a fault lasts.
        WEBHOOK_RETRY_SCHEDULE: '100ms,200ms,500ms,1s,2s,2s,2s,2s',
        WEBHOOK_TIMEOUT: '2s',
        WEBHOOK_LEASE: '5s',
        WEBHOOK_POLL_INTERVAL: '200ms',
        ...options.env,
      },
    });
    started.push(() => mesh.stop());
    return { dir, postgres, nats, upstream, receiver, mesh, webhookUrl: receiver.url(webhookPath), openingCreditUsd, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
