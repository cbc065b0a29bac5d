import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { EventService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { newId } from '@switchboard/runtime/ids';
import { startNatsServer } from '@switchboard/runtime/infra';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import { eventually, meshClient, requireEnv } from '@switchboard/runtime/testing';
import { bootMesh, type RestCall, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { type Received, WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

/**
 * Webhook deliveries under failure: the webhooks process killed (SIGKILL) in the middle of a
 * burst to a flapping receiver, a NATS restart while events keep coming, and a hanging receiver
 * beside a healthy one. One mesh for the file, on a NATS server of its own (so it can be
 * stopped), with a short lease and a millisecond retry schedule.
 */

type NatsServer = Awaited<ReturnType<typeof startNatsServer>>;

let mesh: Mesh;
let call: RestCall;
let certificate: LocalCertificate;
let nats: NatsServer;
let natsDir: string;
const receivers: WebhookReceiver[] = [];

beforeAll(async () => {
  certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  natsDir = await mkdtemp(path.join(tmpdir(), 'switchboard-nats-'));
  nats = await startNatsServer(natsDir);
  mesh = await bootMesh({
    NATS_URL: nats.url,
    WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: certificate.certFile,
    WEBHOOK_RETRY_SCHEDULE: '20ms,50ms,100ms,200ms,400ms,800ms,1s,2s',
    WEBHOOK_TIMEOUT: '2s',
    WEBHOOK_LEASE: '3s',
    WEBHOOK_POLL_INTERVAL: '200ms',
    // No circuit opens: a hanging endpoint keeps all its slots busy (the isolation the slots
    // give is measured, not the circuit's), and the flapping one is never paused.
    WEBHOOK_CIRCUIT_THRESHOLD: '100000',
  });
  call = restClient(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
  await nats?.stop?.();
  if (natsDir) await rm(natsDir, { recursive: true, force: true });
});

afterEach(async () => {
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

async function newReceiver(): Promise<WebhookReceiver> {
  const receiver = await WebhookReceiver.start(certificate);
  receivers.push(receiver);
  return receiver;
}

async function register(user: SignedUp, body: Record<string, unknown>): Promise<{ webhook_id: string }> {
  const response = await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks`, { token: user.token, body });
  expect(response.status, response.text).toBe(201);
  return response.json;
}

/** Every delivery of an endpoint with `status`, page by page (REST, newest first). */
async function deliveriesWith(user: SignedUp, webhookId: string, status: string): Promise<Array<{ delivery_id: string; status: string }>> {
  const all: Array<{ delivery_id: string; status: string }> = [];
  let after = '';
  for (;;) {
    const query = `status=${status}&limit=100${after ? `&after=${encodeURIComponent(after)}` : ''}`;
    const response = await call('GET', `/v1/workspaces/${user.workspaceId}/webhooks/${webhookId}/deliveries?${query}`, { token: user.token });
    expect(response.status, response.text).toBe(200);
    all.push(...response.json.data);
    if (!response.json.has_more) return all;
    after = response.json.next_cursor;
  }
}

/** Runs `task(0..count-1)` with at most `width` in flight. */
async function inParallel(count: number, width: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, worker));
}

/** A small seeded PRNG (mulberry32): the same flapping on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const bodyOf = (request: Received) => JSON.parse(request.body) as { type: string; data: Record<string, unknown> };
const webhookIdOf = (request: Received) => String(request.headers['webhook-id']);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

describe('a crash of the webhooks process', () => {
  it('delivers every event of a 1,000-event burst to a flapping receiver after a kill -9 and a restart', async () => {
    const receiver = await newReceiver();
    const user = await signUp(call);
    const hook = '/flapping';
    const endpoint = await register(user, { url: receiver.url(hook), events: ['agent.completed'] });
    const total = 1000;
    const runId = `run_${newId('x')}`;

    // Flapping: about a third of the requests get a 500, a delivery at most 3 times (so no
    // delivery runs out of its 9 attempts). The 2xx sent per webhook-id are counted.
    const random = seeded(0x5eed);
    const failures = new Map<string, number>();
    const successes = new Map<string, number[]>();
    const success = (request: Received) => {
      successes.set(webhookIdOf(request), [...(successes.get(webhookIdOf(request)) ?? []), request.at]);
      return { status: 204 };
    };

    // SIGKILL with half of the burst published and deliveries under way (while publishes run they
    // take most of the service's database pool, so deliveries go slowly meanwhile). It is sent
    // from the receiver while an attempt waits for its answer: that attempt's lease is held and
    // its result can never be recorded, so its webhook-id must come again after the restart.
    const pid = mesh.pid('webhooks')!;
    let publishedCount = 0;
    let killed: { id: string; at: number } | undefined;
    let reportKill!: () => void;
    const kill = new Promise<void>((resolve) => (reportKill = resolve));
    receiver.reply(hook, (request) => {
      if (!killed && publishedCount >= total / 2 && successes.size >= 20) {
        process.kill(pid, 'SIGKILL');
        killed = { id: webhookIdOf(request), at: request.at };
        reportKill();
        return success(request);
      }
      const failed = failures.get(webhookIdOf(request)) ?? 0;
      if (failed < 3 && random() < 1 / 3) {
        failures.set(webhookIdOf(request), failed + 1);
        return { status: 500, body: 'flap' };
      }
      return success(request);
    });

    // The burst, 32 publishes in flight; a publish refused while the service is down is tried
    // again until it succeeds (one that failed after its commit makes a second event of its seq).
    const events = meshClient(EventService, mesh.urls.webhooks, 'webhooks', { caller: 'data-plane' });
    const retried = new Set<number>();
    const started = performance.now();
    const burst = inParallel(total, 32, async (seq) => {
      let tries = 0;
      await eventually(
        () => {
          if (++tries > 1) retried.add(seq);
          return events.publishEvent(
            { workspaceId: user.workspaceId, type: 'agent.completed', data: { run_id: runId, seq }, idempotencyKey: `${runId}-${seq}` },
            { timeoutMs: 5000 },
          );
        },
        `publishing event ${seq}`,
        60_000,
        50,
      );
      publishedCount += 1;
    });

    await Promise.race([kill, burst.then(() => eventually(() => killed, 'the kill after the burst', 15_000, 10))]);
    const killedAt = killed!.at;
    const successesAtKill = successes.size;
    const publishedAtKill = publishedCount;
    await eventually(() => !alive(pid), 'the killed webhooks process to be gone', 10_000, 20);
    const restartAt = performance.now();
    await mesh.startComponent('webhooks');
    const restartedAt = performance.now();
    await burst;
    const published = performance.now();

    // Every seq of the run reaches the receiver with a 2xx, every webhook-id sent got a 2xx, and
    // the records agree: each delivery succeeded, none is left pending, failed or exhausted.
    const settled = await eventually(
      async () => {
        const requests = receiver.at(hook);
        const seqs = new Set(requests.filter((request) => bodyOf(request).data.run_id === runId).map((request) => Number(bodyOf(request).data.seq)));
        const sentIds = new Set(requests.map(webhookIdOf));
        const unanswered = [...sentIds].filter((id) => !successes.has(id)).length;
        if (seqs.size !== total || unanswered > 0) throw new Error(`${seqs.size} of ${total} seqs delivered, ${unanswered} webhook-ids without a 2xx`);
        const byStatus = Object.fromEntries(
          await Promise.all(
            ['succeeded', 'pending', 'failed', 'exhausted'].map(async (status) => [status, await deliveriesWith(user, endpoint.webhook_id, status)] as const),
          ),
        );
        const counts = Object.entries(byStatus).map(([status, rows]) => `${status} ${rows.length}`);
        const done = byStatus.succeeded.length === sentIds.size && byStatus.pending.length + byStatus.failed.length + byStatus.exhausted.length === 0;
        if (!done) throw new Error(`records: ${counts.join(', ')}; ${sentIds.size} webhook-ids sent`);
        return { sentIds, byStatus };
      },
      'every event of the burst delivered and recorded as succeeded',
      45_000,
      200,
    );
    const { sentIds, byStatus } = settled;
    expect(new Set(byStatus.succeeded.map((row) => row.delivery_id))).toEqual(sentIds);
    expect(byStatus.succeeded.every((row) => row.status === 'succeeded')).toBe(true);
    for (const status of ['pending', 'failed', 'exhausted']) expect(byStatus[status], status).toEqual([]);

    // One event per seq, retried publishes included: the idempotency key makes a retry the same event.
    const idsBySeq = new Map<number, Set<string>>();
    for (const request of receiver.at(hook)) {
      const seq = Number(bodyOf(request).data.seq);
      idsBySeq.set(seq, (idsBySeq.get(seq) ?? new Set()).add(webhookIdOf(request)));
    }
    expect([...idsBySeq.values()].filter((ids) => ids.size > 1)).toEqual([]);
    expect(sentIds.size).toBe(total);
    expect(byStatus.succeeded).toHaveLength(total);

    // A second 2xx for one webhook-id only for an attempt the killed process made and never
    // recorded: at most its 8 slots of this endpoint, each first answered before the restart.
    const resent = [...successes].filter(([, at]) => at.length > 1);
    expect(resent.length).toBeLessThanOrEqual(8);
    for (const [id, at] of resent) expect(at[0], `first success of ${id}`).toBeLessThan(restartAt);
    expect(receiver.at(hook).filter((request) => webhookIdOf(request) === killed!.id && request.at > restartAt).length).toBeGreaterThanOrEqual(1);
    expect(resent.map(([id]) => id)).toContain(killed!.id);

    const requests = receiver.at(hook).length;
    const freedLeases = mesh
      .output('webhooks')
      .split('\n')
      .filter((line) => line.includes('freed expired delivery leases'))
      .reduce((sum, line) => sum + Number(JSON.parse(line).freed), 0);
    console.log(
      `kill -9 burst: ${total} events (${retried.size} publishes retried), ${requests} requests, ` +
        `${[...failures.values()].reduce((a, b) => a + b, 0)} answered 500; killed after ${publishedAtKill} publishes and ${successesAtKill} successes at ` +
        `${Math.round(killedAt - started)} ms, restarted in ${Math.round(restartedAt - restartAt)} ms, burst published at ` +
        `${Math.round(published - started)} ms, all delivered at ${Math.round(performance.now() - started)} ms; ` +
        `${freedLeases} leases of the killed process freed, ${resent.length} webhook-ids answered 2xx twice`,
    );
  }, 90_000);
});

describe('a NATS restart', () => {
  it('delivers the events published to the stream and the key.created of keys made while NATS was down', async () => {
    const receiver = await newReceiver();
    const user = await signUp(call);
    const hook = '/through-nats';
    await register(user, { url: receiver.url(hook), events: ['agent.completed', 'key.created'] });
    const runId = `run_${newId('x')}`;
    const subject = `${requireEnv('EVENTS_SUBJECT_PREFIX')}.agent.completed`;
    const nc: NatsConnection = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100, timeout: 5000 });
    try {
      const js = jetstream(nc, { timeout: 2000 });
      const published: number[] = [];
      /** agent.completed as an agent runtime publishes it to the stream (an envelope, Nats-Msg-Id = event id). */
      const publishToStream = async (seq: number) => {
        const eventId = newId('evt');
        const payload = JSON.stringify(
          buildEventPayload(eventId, { type: 'agent.completed', workspaceId: user.workspaceId, data: { run_id: runId, seq } }, 'agent-runtime'),
        );
        await eventually(() => js.publish(subject, payload, { msgID: eventId }), `publishing seq ${seq} to the stream`, 20_000, 100);
        published.push(seq);
      };
      const keyIds: string[] = [];
      const createKeys = async (count: number, name: string) => {
        for (let i = 0; i < count; i++) {
          const created = await call('POST', '/v1/keys', { token: user.token, body: { name: `${name}-${i}` } });
          expect(created.status, created.text).toBe(201);
          keyIds.push(created.json.key.key_id);
        }
      };
      const received = () => {
        const seqs = new Set<number>();
        const keys = new Set<string>();
        for (const request of receiver.at(hook)) {
          const { type, data } = bodyOf(request);
          if (type === 'agent.completed' && data.run_id === runId) seqs.add(Number(data.seq));
          if (type === 'key.created') keys.add(String(data.key_id));
        }
        return { seqs, keys };
      };

      // Before: 40 events on the stream and 5 keys; NATS stops as soon as they are stored (in the
      // stream, in the keys outbox), so some are still on their way.
      await createKeys(5, 'before');
      await inParallel(40, 8, (i) => publishToStream(i));
      await nats.stop!();
      const stoppedAt = performance.now();
      const atStop = received();

      // Down: REST still works (the key.created events wait in the keys outbox), and PublishEvent
      // still delivers (its delivery rows are written with the event, no NATS in between).
      const beforeDown = keyIds.length;
      await createKeys(10, 'down');
      const events = meshClient(EventService, mesh.urls.webhooks, 'webhooks', { caller: 'data-plane' });
      for (let seq = 1000; seq < 1010; seq++) {
        await events.publishEvent({ workspaceId: user.workspaceId, type: 'agent.completed', data: { run_id: runId, seq } });
      }
      await eventually(() => [...Array(10).keys()].every((i) => received().seqs.has(1000 + i)), 'PublishEvent deliveries while NATS is down', 15_000, 50);
      const whileDown = received().keys;
      expect(keyIds.slice(beforeDown).filter((id) => whileDown.has(id))).toEqual([]);

      // Up again on the same port and store: the outboxes drain, the consumers resume.
      nats = await startNatsServer(natsDir, nats.port);
      const downMs = performance.now() - stoppedAt;
      await Promise.all([inParallel(40, 8, (i) => publishToStream(100 + i)), createKeys(5, 'after')]);
      const upAt = performance.now();

      const expectedSeqs = [...published, ...Array.from({ length: 10 }, (_, i) => 1000 + i)];
      await eventually(
        () => {
          const { seqs, keys } = received();
          return expectedSeqs.every((seq) => seqs.has(seq)) && keyIds.every((id) => keys.has(id));
        },
        'every event after the NATS restart',
        45_000,
        100,
      );
      const { seqs, keys } = received();
      expect(seqs.size).toBe(90);
      expect(keyIds.filter((id) => keys.has(id))).toHaveLength(20);
      console.log(
        `NATS restart: ${atStop.seqs.size}/40 stream events and ${atStop.keys.size}/5 key.created delivered when NATS stopped; ` +
          `down ${Math.round(downMs)} ms; 80 stream events, 10 PublishEvent, 20 key.created delivered ` +
          `${Math.round(performance.now() - upAt)} ms after the last publish; ${receiver.at(hook).length} requests`,
      );
    } finally {
      await nc.close();
    }
  }, 90_000);
});

describe('isolation', () => {
  it('keeps a healthy endpoint fast while another endpoint hangs (p99 event→receipt < 1 s)', async () => {
    const receiver = await newReceiver();
    const stuck = await signUp(call);
    const healthy = await signUp(call);
    await register(stuck, { url: receiver.url('/hang'), events: ['agent.completed'] });
    await register(healthy, { url: receiver.url('/healthy'), events: ['agent.completed'] });
    receiver.reply('/hang', () => 'hang');
    const events = meshClient(EventService, mesh.urls.webhooks, 'webhooks', { caller: 'data-plane' });

    const publishTo = (user: SignedUp, seq: number) => events.publishEvent({ workspaceId: user.workspaceId, type: 'agent.completed', data: { seq } });

    // The hanging endpoint gets a backlog and holds its slots (every attempt runs into WEBHOOK_TIMEOUT)…
    await inParallel(300, 16, async (seq) => void (await publishTo(stuck, seq)));
    await eventually(() => receiver.at('/hang').length >= 8, 'the hanging endpoint to hold its slots', 15_000, 20);

    // …and keeps getting events while the healthy endpoint gets its own.
    const count = 200;
    const publishedAt = new Map<number, number>();
    await Promise.all([
      inParallel(200, 2, async (seq) => void (await publishTo(stuck, 300 + seq))),
      inParallel(count, 4, async (seq) => {
        publishedAt.set(seq, performance.now());
        await publishTo(healthy, seq);
      }),
    ]);
    const arrivals = await eventually(
      () => {
        const first = new Map<number, number>();
        for (const request of receiver.at('/healthy')) {
          const seq = Number(bodyOf(request).data.seq);
          if (!first.has(seq)) first.set(seq, request.at);
        }
        return first.size === count ? first : undefined;
      },
      'every event at the healthy endpoint',
      20_000,
      50,
    );
    const latencies = [...arrivals].map(([seq, at]) => at - publishedAt.get(seq)!).sort((a, b) => a - b);
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    console.log(
      `isolation: healthy endpoint event→receipt over ${count} events: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, ` +
        `max ${latencies.at(-1)!.toFixed(1)} ms; the hanging endpoint got ${receiver.at('/hang').length} requests`,
    );
    expect(p99).toBeLessThan(1000);
  }, 60_000);
});
