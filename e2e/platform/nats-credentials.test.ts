import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { componentNames, meshComponents } from '@switchboard/contracts/components';
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus as ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { eventDurable, natsRoles, workDurable } from '@switchboard/contracts/nats-permissions';
import { readEventsConfig } from '@switchboard/runtime/config';
import { type CredentialsState, createCredentials, credentialsEnv, publicKeyOf } from '@switchboard/runtime/dev/component-credentials';
import { writeCredentials } from '@switchboard/runtime/dev/credentials';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { freePort, startNatsServer } from '@switchboard/runtime/infra';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { tokenOf, waitForMail } from '@switchboard/testkit/mailbox';
import { bootMesh, type RestCall, restClient, signUp } from '@switchboard/testkit/mesh';
import { verifyDelivery, WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The whole mesh with one credential per component (docs/operations.md#nats-credentials): a
 * nats-server of this file's own runs the authorization `npm run credentials` generates, and each
 * component gets only its generated Secret's values (its NKey seed and its mesh keyring; no shared
 * SWITCHBOARD_MESH_SECRET). A user's path runs through every component; NATS logs no permission
 * violation on the way.
 */

const namespace = 'natscredentials';
const events = readEventsConfig({ SWITCHBOARD_NAMESPACE: namespace });
let state: CredentialsState;
let dir: string;
let nats: Awaited<ReturnType<typeof startNatsServer>>;
let monitorPort: number;
let receiver: WebhookReceiver;
let mesh: Mesh;
let call: RestCall;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'switchboard-nats-credentials-'));
  state = createCredentials(namespace, false);
  await writeCredentials(path.join(dir, 'credentials'), state, 'switchboard');
  monitorPort = await freePort();
  const config = path.join(dir, 'nats.conf');
  await writeFile(config, `include ./credentials/nats-authorization.conf\nhttp: "127.0.0.1:${monitorPort}"\nlog_file: "${path.join(dir, 'nats.log')}"\n`);
  nats = await startNatsServer(path.join(dir, 'nats'), undefined, config);
  const certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  receiver = await WebhookReceiver.start(certificate);
  mesh = await bootMesh(
    {
      NATS_URL: nats.url,
      SWITCHBOARD_NAMESPACE: namespace,
      // The generator's names are the namespace's defaults: the test run's own prefixes (global-setup) give way.
      EVENTS_SUBJECT_PREFIX: events.eventsSubjectPrefix,
      EVENTS_STREAM: events.eventsStream,
      WORK_SUBJECT_PREFIX: events.workSubjectPrefix,
      WORK_STREAM: events.workStream,
      DEMO_UPSTREAM: 'true',
      WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
      NODE_EXTRA_CA_CERTS: certificate.certFile,
      WEBHOOK_POLL_INTERVAL: '200ms',
    },
    // Only what each component's Secret holds: the shared mesh secret is unset.
    Object.fromEntries(componentNames.map((component) => [component, { ...credentialsEnv(state, component), SWITCHBOARD_MESH_SECRET: '' }])),
  );
  call = restClient(mesh.gatewayUrl);
}, 180_000);

afterAll(async () => {
  await mesh?.stop();
  await receiver?.close();
  await nats?.stop?.();
});

describe('a mesh with per-component credentials', () => {
  it('connects each component to NATS as its own user', async () => {
    const response = await fetch(`http://127.0.0.1:${monitorPort}/connz?auth=true&limit=1000`);
    const { connections } = (await response.json()) as { connections: { name?: string; authorized_user?: string }[] };
    for (const component of componentNames) {
      const own = publicKeyOf(state.components[component].natsSeeds[0]);
      const mine = connections.filter((connection) => connection.name === component);
      expect(mine.length, component).toBeGreaterThan(0);
      for (const connection of mine) expect(connection.authorized_user, component).toBe(own);
    }
  });

  it('serves a user: sign-up, verification, sign-in, an API key, a webhook, a completion, its usage settled into billing', async () => {
    expect((await call('GET', '/readyz')).status).toBe(200);
    const user = await signUp(call);
    const verified = await call('POST', '/v1/auth/verify-email', {
      body: { token: tokenOf(await waitForMail(mesh.env.MAILBOX_DIR, user.email, 'email_verification')) },
    });
    expect(verified.status, verified.text).toBe(204);
    const login = await call('POST', '/v1/auth/login', { body: { email: user.email, password: user.password } });
    expect(login.status, login.text).toBe(200);
    const token = login.json.session.access_token as string;

    const hook = '/nats-credentials';
    const endpoint = await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks`, { token, body: { url: receiver.url(hook), events: ['key.created'] } });
    expect(endpoint.status, endpoint.text).toBe(201);

    // With an Idempotency-Key: the gateway keeps the answer in its KV bucket.
    const created = await call('POST', '/v1/keys', { token, body: { name: 'nats' }, headers: { 'idempotency-key': 'nats-credentials-key' } });
    expect(created.status, created.text).toBe(201);
    const delivered = await eventually(async () => receiver.at(hook)[0], 'the key.created delivery', 20_000, 50);
    expect(verifyDelivery(endpoint.json.secret, delivered)).toMatchObject({ type: 'key.created', data: { key_id: created.json.key.key_id } });

    const before = (await call('GET', '/v1/billing/balance', { token })).json.balance_usd as string;
    const completion = await fetch(`${mesh.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.json.full_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'service/fast', messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(completion.status, await completion.clone().text()).toBe(200);
    // Usage goes data plane → work stream → billing: the balance falls and the day's usage counts the request.
    await eventually(
      async () => {
        const balance = (await call('GET', '/v1/billing/balance', { token })).json.balance_usd as string;
        return Number(balance) < Number(before) ? balance : undefined;
      },
      'the usage settled into the balance',
      20_000,
      100,
    );
    const usage = await call('GET', '/v1/billing/usage?days=1', { token });
    expect(usage.status, usage.text).toBe(200);
    expect(usage.json.data, usage.text).toEqual([expect.objectContaining({ requests: 1 })]);
  });

  it('runs exactly the durable consumers the contracts name (docs/operations.md#nats-credentials)', async () => {
    const expected = componentNames
      .flatMap((component) => [
        ...natsRoles[component].consumes.map((type) => eventDurable(component, type)),
        ...natsRoles[component].consumesWork.map((subject) => workDurable(component, subject)),
      ])
      .sort();
    const running = async () => {
      const response = await fetch(`http://127.0.0.1:${monitorPort}/jsz?accounts=true&streams=true&consumers=true`);
      const jsz = (await response.json()) as { account_details?: { stream_detail?: { name: string; consumer_detail?: { name: string }[] }[] }[] };
      return (jsz.account_details ?? [])
        .flatMap((account) => account.stream_detail ?? [])
        .filter((stream) => stream.name === events.eventsStream || stream.name === events.workStream)
        .flatMap((stream) => (stream.consumer_detail ?? []).map((consumer) => consumer.name))
        .sort();
    };
    await eventually(async () => JSON.stringify(await running()) === JSON.stringify(expected), 'every durable consumer', 10_000, 100);
  });

  it('turns a component whose NATS credentials are refused unready, says so once, and keeps it alive', async () => {
    // A seed of other credentials: a user this NATS does not know.
    const stranger = createCredentials(namespace, false).components.keys.natsSeeds[0];
    const strangerKey = publicKeyOf(stranger);
    const started = await Promise.all(
      (['data-plane', 'keys', 'gateway'] as const).map(async (component) => {
        const port = await freePort();
        const dir = meshComponents.find((candidate) => candidate.name === component)?.dir ?? '';
        const child = spawn(process.execPath, [path.join(repoRoot, dir, 'dist/src/main.js')], {
          env: {
            ...process.env,
            ...mesh.env,
            ...credentialsEnv(state, component),
            SWITCHBOARD_MESH_SECRET: '',
            NATS_NKEY_SEED: stranger,
            PORT: String(port),
            METRICS_PORT: '0',
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        const lines: string[] = [];
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => lines.push(...chunk.split('\n')));
        return { component, port, child, lines };
      }),
    );
    try {
      const [dataPlane, keys, gateway] = started;
      const dataPlaneUrl = `http://127.0.0.1:${dataPlane.port}`;
      await eventually(
        async () =>
          (
            await fetch(`${dataPlaneUrl}/readyz`).then(
              (response) => response.text(),
              () => '',
            )
          ).includes('nats_credentials_refused'),
        'the data plane unready',
        20_000,
        100,
      );
      expect((await fetch(`${dataPlaneUrl}/healthz`)).status).toBe(200);
      const gatewayUrl = `http://127.0.0.1:${gateway.port}`;
      await eventually(
        async () =>
          (
            await fetch(`${gatewayUrl}/readyz?scope=self`).then(
              (response) => response.text(),
              () => '',
            )
          ).includes('nats_credentials_refused'),
        'the gateway unready',
        20_000,
        100,
      );
      expect((await fetch(`${gatewayUrl}/healthz`)).status).toBe(200);
      const health = meshClient(Health, `http://127.0.0.1:${keys.port}`, 'keys', null, { meshSecret: 'x'.repeat(32) });
      const status = (service: string) =>
        health.check(create(HealthCheckRequestSchema, { service }), { timeoutMs: 2000 }).then(
          (answer) => answer.status,
          () => undefined,
        );
      await eventually(async () => (await status('')) === ServingStatus.NOT_SERVING, 'keys NOT_SERVING', 30_000, 100);
      expect(await status('liveness')).toBe(ServingStatus.SERVING);
      for (const { component, lines } of started) {
        const refusals = lines.filter((line) => line.includes('NATS_NKEY_SEED'));
        expect(refusals, component).toHaveLength(1);
        expect(refusals[0]).toContain(strangerKey);
        expect(lines.join('\n')).not.toContain(stranger);
      }
    } finally {
      await Promise.all(
        started.map(
          ({ child }) =>
            new Promise((resolve) => {
              if (child.exitCode !== null) return resolve(null);
              child.once('exit', resolve);
              child.kill('SIGTERM');
            }),
        ),
      );
    }
  }, 60_000);

  it('leaves no permission violation in the NATS log: every subject and consumer the components used is theirs', async () => {
    const log = await readFile(path.join(dir, 'nats.log'), 'utf8');
    expect(log.split('\n').filter((line) => /violation/i.test(line))).toEqual([]);
  });
});
