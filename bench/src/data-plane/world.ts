import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { createKey, registerUser } from '@switchboard/testkit/gateway-accounts';
import { connectDatabase, postgresBackends } from '../measure/postgres.js';
import { type BenchSession, startBenchMesh, startOwnNats } from '../measure/session.js';
import { benchNodeFlags } from '../measure/settings.js';
import { balanceOf, catalogJson, createLimitedKey, spendOf, topUp } from './account.js';
import type { Watch } from './drive.js';
import { topUpUsd } from './settings.js';
import { startUpstreamProcess } from './upstream.js';

/**
 * A user whose workspace was topped up through the sandbox checkout, with an API key without
 * limits and one with every limit set; the balance and the keys' spend before the load.
 */
async function prepareAccount(session: BenchSession, mesh: Mesh) {
  const user = await registerUser(mesh.gatewayUrl, 'data-plane');
  const balanceAtStart = await balanceOf(mesh.gatewayUrl, user.accessToken);
  await topUp(mesh.gatewayUrl, user.accessToken, topUpUsd);
  const balanceAfterTopUp = await balanceOf(mesh.gatewayUrl, user.accessToken);
  const { keyId, fullKey } = await createKey(mesh.gatewayUrl, user.accessToken, 'bench data plane');
  const spendAtStart = await spendOf(mesh.gatewayUrl, user.accessToken, keyId);
  const limited = await createLimitedKey(mesh.gatewayUrl, user.accessToken);
  const limitedSpendAtStart = await spendOf(mesh.gatewayUrl, user.accessToken, limited.keyId);
  session.progress(`workspace balance ${balanceAtStart} → ${balanceAfterTopUp} after the sandbox top-up; key spend ${spendAtStart}`);
  return { user, keyId, fullKey, balanceAtStart, balanceAfterTopUp, spendAtStart, limited: { ...limited, spendAtStart: limitedSpendAtStart } };
}

/**
 * What bench:data-plane runs on: the upstream in its own process, a temporary model catalog whose
 * two regions both point at it, the mesh on that catalog, the account, a client of the bench
 * database.
 */
export async function startDataPlaneWorld(session: BenchSession) {
  const nats = await startOwnNats(session);
  session.progress('starting the upstream process');
  const upstream = await startUpstreamProcess([]);
  session.defer('upstream', () => upstream.stop());
  const catalogFile = path.join(session.dataDir, 'models.json');
  await writeFile(catalogFile, catalogJson(upstream.baseUrl));

  const meshEnv = { LOG_LEVEL: 'warn', SWITCHBOARD_MODELS_FILE: catalogFile, BENCH_UPSTREAM_KEY: 'sk-bench' };
  session.progress(`starting the mesh (LOG_LEVEL=warn, SWITCHBOARD_MODELS_FILE=<temp catalog → ${upstream.baseUrl}>)`);
  const { mesh, meshStartSeconds } = await startBenchMesh(session, { env: meshEnv, nodeFlags: benchNodeFlags() ?? [] });
  const account = await prepareAccount(session, mesh);
  const db = await connectDatabase(mesh.env.DATABASE_URL);
  session.defer('database client', () => db.end());
  return { mesh, meshStartSeconds, meshEnv, natsSetup: nats.setup, natsPid: nats.pid, upstream, account, db };
}

export type DataPlaneWorld = Awaited<ReturnType<typeof startDataPlaneWorld>>;

/** The processes whose CPU is measured over each run, by the name they have in the report. */
export function watchOf(world: DataPlaneWorld): Watch {
  const { mesh } = world;
  const pids = {
    gateway: mesh.pid('gateway'),
    dataPlane: mesh.pid('data-plane'),
    keys: mesh.pid('keys'),
    billing: mesh.pid('billing'),
    conversations: mesh.pid('conversations'),
    identity: mesh.pid('identity'),
    webhooks: mesh.pid('webhooks'),
  };
  return async () => ({
    gateway: [pids.gateway],
    'data-plane': [pids.dataPlane],
    keys: [pids.keys],
    billing: [pids.billing],
    conversations: [pids.conversations],
    postgres: await postgresBackends(mesh.env.DATABASE_URL, world.db),
    'nats-server': [world.natsPid],
    upstream: [world.upstream.pid],
    bench: [process.pid],
    'identity+webhooks': [pids.identity, pids.webhooks],
  });
}
