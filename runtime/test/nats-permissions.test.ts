import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, nkeyAuthenticator, nkeys, PermissionViolationError } from '@nats-io/transport-node';
import type { ComponentName } from '@switchboard/contracts/components';
import { eventDurable, natsInboxPrefix, workDurable } from '@switchboard/contracts/nats-permissions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CredentialsState, createCredentials } from '../src/dev/component-credentials.js';
import { writeCredentials } from '../src/dev/credentials.js';
import { natsNamesOf } from '../src/dev/nats-authorization.js';
import { startNatsServer } from '../src/infra.js';
import { createLogger } from '../src/log.js';
import { connectNats, ensureEventStream, ensureWorkStream, type NatsConnection } from '../src/nats.js';

/**
 * The NATS users `npm run credentials` generates, enforced by a nats-server of this test's own
 * started with the generated authorization (docs/operations.md#nats-credentials).
 */
const namespace = 'permtest';
const names = natsNamesOf(namespace);
let state: CredentialsState;
let server: Awaited<ReturnType<typeof startNatsServer>>;
const connections: NatsConnection[] = [];

beforeAll(async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-nats-permissions-'));
  state = createCredentials(namespace, true);
  await writeCredentials(path.join(dir, 'credentials'), state, 'switchboard');
  const config = path.join(dir, 'nats.conf');
  await writeFile(config, 'include ./credentials/nats-authorization.conf\n');
  server = await startNatsServer(path.join(dir, 'nats'), undefined, config);
});

afterAll(async () => {
  await Promise.all(connections.map((nc) => nc.close()));
  await server?.stop?.();
});

async function connectAs(component: ComponentName): Promise<{ nc: NatsConnection; violations: PermissionViolationError[] }> {
  const nc = await connectNats(server.url, component, createLogger('nats-permissions-test', 'silent'), { seed: state.components[component].natsSeeds[0] });
  connections.push(nc);
  const violations: PermissionViolationError[] = [];
  void (async () => {
    for await (const status of nc.status()) if (status.type === 'error' && status.error instanceof PermissionViolationError) violations.push(status.error);
  })();
  return { nc, violations };
}

/** Polls until `check` holds (the server answers a violation asynchronously), failing after a deadline. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const event = (type: string) => `${names.eventsSubjectPrefix}.${type}`;

describe('the generated NATS users', () => {
  it('refuse a publication outside the component’s own subjects', async () => {
    const keys = await connectAs('keys');
    keys.nc.publish(event('billing.balance.changed'), '{}');
    await eventually(
      () => keys.violations.some((v) => v.operation === 'publish' && v.subject === event('billing.balance.changed')),
      'keys publishing billing.balance.changed to be refused',
    );
    const dataPlane = await connectAs('data-plane');
    dataPlane.nc.publish(event('organization.deleted'), '{}');
    await eventually(
      () => dataPlane.violations.some((v) => v.operation === 'publish' && v.subject === event('organization.deleted')),
      'the data plane publishing organization.deleted to be refused',
    );
  });

  it('refuse a subscription outside them, and another component’s inbox', async () => {
    const keys = await connectAs('keys');
    keys.nc.subscribe(event('billing.>'));
    keys.nc.subscribe(`${natsInboxPrefix('billing')}.>`);
    await eventually(
      () => keys.violations.filter((v) => v.operation === 'subscription').length === 2,
      'keys subscribing to billing events and billing’s inbox to be refused',
    );
  });

  it('refuse another component’s durable consumer', async () => {
    const keys = await connectAs('keys');
    await ensureEventStream(keys.nc, names.eventsStream, names.eventsSubjectPrefix);
    const jsm = await jetstreamManager(keys.nc, { timeout: 2000 });
    await expect(
      jsm.consumers.add(names.eventsStream, {
        durable_name: eventDurable('billing', 'user.email_verified'),
        filter_subject: event('user.email_verified'),
        ack_policy: AckPolicy.Explicit,
      }),
    ).rejects.toThrow();
    await eventually(() => keys.violations.some((v) => v.operation === 'publish' && v.subject.includes('billing-user-email_verified')), 'the refusal');
  });

  it('refuse an unknown seed: the component hears of it (and turns unready) and keeps trying', async () => {
    const stranger = new TextDecoder().decode(nkeys.createUser().getSeed());
    const lines: string[] = [];
    const log = createLogger('nats-permissions-test', 'info', { write: (line) => void lines.push(line) });
    let refused = false;
    const pending = connectNats(server.url, 'keys', log, {
      seed: stranger,
      onRefused: (now) => {
        refused = now;
      },
    });
    await eventually(() => refused, 'the refusal to be told');
    const publicKey = nkeys.fromSeed(new TextEncoder().encode(stranger)).getPublicKey();
    const refusals = lines.filter((line) => line.includes('NATS_NKEY_SEED'));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toContain(publicKey);
    expect(refusals[0]).not.toContain(stranger);
    // Still trying, not given up: the promise is pending; a connection without credentials is refused too.
    expect(await Promise.race([pending.then(() => 'connected'), new Promise((resolve) => setTimeout(resolve, 50, 'pending'))])).toBe('pending');
    await expect(connect({ servers: server.url, authenticator: nkeyAuthenticator(new TextEncoder().encode(stranger)) })).rejects.toThrow(/authorization/i);
    await expect(connect({ servers: server.url })).rejects.toThrow(/authorization/i);
  });

  it('let each component do its own work: events through its durable consumers, usage through the work stream', async () => {
    const billing = await connectAs('billing');
    const keys = await connectAs('keys');
    const dataPlane = await connectAs('data-plane');
    await ensureEventStream(billing.nc, names.eventsStream, names.eventsSubjectPrefix);
    await ensureWorkStream(dataPlane.nc, names.workStream, namespace);

    // keys consumes billing's balance changes with its own durable consumer.
    const keysJsm = await jetstreamManager(keys.nc, { timeout: 2000 });
    const durable = eventDurable('keys', 'billing.balance.changed');
    await keysJsm.consumers.add(names.eventsStream, {
      durable_name: durable,
      filter_subject: event('billing.balance.changed'),
      ack_policy: AckPolicy.Explicit,
    });
    await jetstream(billing.nc).publish(event('billing.balance.changed'), '{"n":1}', { msgID: 'evt_perm_1' });
    const received = await (await jetstream(keys.nc).consumers.get(names.eventsStream, durable)).next({ expires: 5000 });
    expect(received?.string()).toBe('{"n":1}');
    await received?.ackAck();

    // The data plane publishes usage; billing consumes it and reads the subject's last message.
    await jetstream(dataPlane.nc).publish(names.workSubjects.usage, 'usage', { msgID: 'gen_perm_1' });
    const billingJsm = await jetstreamManager(billing.nc, { timeout: 2000 });
    const usageDurable = workDurable('billing', 'usage');
    await billingJsm.consumers.add(names.workStream, { durable_name: usageDurable, filter_subject: names.workSubjects.usage, ack_policy: AckPolicy.Explicit });
    const usage = await (await jetstream(billing.nc).consumers.get(names.workStream, usageDurable)).next({ expires: 5000 });
    expect(usage?.string()).toBe('usage');
    await usage?.ackAck();
    expect((await billingJsm.streams.getMessage(names.workStream, { last_by_subj: names.workSubjects.usage }))?.seq).toBeGreaterThan(0);

    // The data plane's key nudges: a plain subscription to key events.
    const nudges = dataPlane.nc.subscribe(event('key.>'), { max: 1 });
    await dataPlane.nc.flush();
    await jetstream(keys.nc).publish(event('key.revoked'), '{}', { msgID: 'evt_perm_2' });
    for await (const msg of nudges) expect(msg.subject).toBe(event('key.revoked'));

    for (const component of [billing, keys, dataPlane]) expect(component.violations).toEqual([]);
  });

  it('let the agent user publish agent.completed and nothing else', async () => {
    const seed = state.agent?.natsSeeds[0] ?? '';
    const agent = await connect({
      servers: server.url,
      authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
      inboxPrefix: natsInboxPrefix('agent'),
    });
    connections.push(agent);
    const ack = await jetstream(agent).publish(event('agent.completed'), '{}', { msgID: 'evt_perm_agent' });
    expect(ack.stream).toBe(names.eventsStream);
    await expect(jetstream(agent).publish(event('key.revoked'), '{}', { timeout: 1000 })).rejects.toThrow();
  });
});
