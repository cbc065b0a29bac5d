import { randomBytes } from 'node:crypto';
import { EventService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { createPeerClient } from '@switchboard/runtime/clients';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { registerUser } from '@switchboard/testkit/gateway-accounts';
import { connectDatabase } from '../measure/postgres.js';
import { type BenchSession, startBenchMesh, startOwnNats } from '../measure/session.js';
import { natsServerPid } from './jetstream.js';
import type { Publish } from './publish-loops.js';
import { startReceiver } from './receiver.js';
import { callTimeoutMs, endpointConcurrency } from './settings.js';

/** POST /v1/workspaces/{id}/webhooks: an endpoint for agent.completed at `url`; its id. */
export async function registerEndpoint(gatewayUrl: string, user: { workspaceId: string; accessToken: string }, url: string): Promise<string> {
  const created = await fetch(`${gatewayUrl}/v1/workspaces/${user.workspaceId}/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, events: ['agent.completed'], description: 'bench' }),
    signal: AbortSignal.timeout(15_000),
  });
  const createdText = await created.text();
  if (created.status !== 201) throw new Error(`POST /v1/workspaces/…/webhooks answered ${created.status}: ${createdText.slice(0, 500)}`);
  return (JSON.parse(createdText) as { webhook_id: string }).webhook_id;
}

/** PublishEvent as the data plane calls it: HTTP/2, Connect binary, a mesh token of caller "data-plane" (cached by MeshTokens). */
export function publisherOf(mesh: Mesh, workspaceId: string, runId: string): Publish {
  const eventsClient = createPeerClient(EventService, { name: 'webhooks', url: mesh.urls.webhooks }, new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET), {
    caller: 'data-plane',
  });
  return (phase, seq) =>
    eventsClient.publishEvent(
      { workspaceId, type: 'agent.completed', data: { bench_run: runId, bench_phase: phase, bench_seq: seq, ok: true } },
      { timeoutMs: callTimeoutMs },
    );
}

/**
 * What bench:webhooks runs on: an HTTPS receiver in this process (a throwaway certificate the
 * mesh trusts), the mesh allowed to deliver to it, one user with one endpoint there, the
 * publisher, and a client of the bench database.
 */
export async function startWebhooksWorld(session: BenchSession) {
  const nats = await startOwnNats(session);
  const certificate = await createLocalCertificate(session.dataDir);
  const receiver = await startReceiver(certificate.key, certificate.cert);
  session.defer('receiver', () => receiver.close());
  const meshEnv = {
    LOG_LEVEL: 'warn',
    WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: certificate.certFile,
    WEBHOOK_ENDPOINT_CONCURRENCY: String(endpointConcurrency),
  };
  session.progress(
    `starting the mesh (${Object.entries(meshEnv)
      .map(([k, v]) => `${k}=${k === 'NODE_EXTRA_CA_CERTS' ? '<bench cert>' : v}`)
      .join(' ')})`,
  );
  const { mesh, meshStartSeconds } = await startBenchMesh(session, { env: meshEnv });
  const user = await registerUser(mesh.gatewayUrl, 'webhooks');
  const receiverUrl = `https://localhost:${receiver.port}/bench`;
  const webhookId = await registerEndpoint(mesh.gatewayUrl, user, receiverUrl);
  const runId = randomBytes(4).toString('hex');
  const publish = publisherOf(mesh, user.workspaceId, runId);
  const db = await connectDatabase(mesh.env.DATABASE_URL);
  session.defer('database client', () => db.end());
  const natsPid = natsServerPid(mesh.env.NATS_URL, nats.pid);
  return {
    mesh,
    certificate,
    meshStartSeconds,
    meshEnv,
    natsSetup: nats.setup,
    natsPid,
    receiver,
    receiverUrl,
    webhookId,
    workspaceId: user.workspaceId,
    runId,
    publish,
    db,
  };
}

export type WebhooksWorld = Awaited<ReturnType<typeof startWebhooksWorld>>;
