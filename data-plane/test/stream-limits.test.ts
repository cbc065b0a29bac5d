import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { readDataPlaneConfig } from '@switchboard/data-plane/config';
import { replyTo } from '@switchboard/data-plane/server';
import { readEvents } from '@switchboard/data-plane/upstream';
import { ModelCatalog } from '@switchboard/runtime/model-catalog';
import { eventually } from '@switchboard/runtime/testing';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * The bounds of a stream (docs/api/front-door.md#streams): a client that stops reading is dropped
 * after UPSTREAM_IDLE_TIMEOUT, and a stream is cut after STREAM_MAX_DURATION; either way the
 * reading of the upstream ends without an error, so what was produced is billed.
 */

const idleTimeoutMs = 300;
/** More than the loopback's socket buffers hold, so a client that does not read leaves writes waiting. */
const streamBytes = 64 * 1024 * 1024;
const event = `data: ${'x'.repeat(64 * 1024 - 8)}\n\n`;

interface Outcome {
  written: number;
  lastWriteStartedAt: number;
  endedAt?: number;
  dropped?: boolean;
}

/** A server answering every request with a stream through the front door's Reply, as Completions writes one. */
async function streamingServer() {
  const outcomes: Outcome[] = [];
  const server = http.createServer((_req, res) => {
    const outcome: Outcome = { written: 0, lastWriteStartedAt: 0 };
    outcomes.push(outcome);
    const reply = replyTo(res, idleTimeoutMs);
    void (async () => {
      reply.startStream({});
      while (outcome.written < streamBytes && !reply.signal.aborted) {
        outcome.lastWriteStartedAt = performance.now();
        await reply.write(event);
        outcome.written += event.length;
      }
      reply.end();
      outcome.dropped = reply.signal.aborted;
      outcome.endedAt = performance.now();
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, outcomes, port: (server.address() as AddressInfo).port };
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

describe('a client that stops reading', () => {
  it('is dropped after UPSTREAM_IDLE_TIMEOUT without a drain, and the write resolves', async () => {
    const { server, outcomes, port } = await streamingServer();
    servers.push(server);
    const socket = net.connect(port, '127.0.0.1');
    // Never read: the kernel's buffers fill, then the server's writes wait for a drain that never comes.
    socket.pause();
    socket.write('GET /v1/chat/completions HTTP/1.1\r\nHost: test\r\n\r\n');
    try {
      const outcome = await eventually(() => outcomes[0]?.endedAt !== undefined && outcomes[0], 'the stream to end', 15_000);
      expect(outcome.dropped).toBe(true);
      expect(outcome.written).toBeLessThan(streamBytes);
      // The wait that ended it lasted the idle timeout (timers may fire a little early, never much).
      expect(outcome.endedAt! - outcome.lastWriteStartedAt).toBeGreaterThanOrEqual(idleTimeoutMs - 5);
    } finally {
      socket.destroy();
    }
  });

  it('is not dropped while it reads, however much is sent', async () => {
    const { server, outcomes, port } = await streamingServer();
    servers.push(server);
    const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`);
    let received = 0;
    for await (const chunk of response.body!) received += (chunk as Uint8Array).length;
    expect(received).toBeGreaterThanOrEqual(streamBytes);
    expect(outcomes[0]).toMatchObject({ dropped: false, written: received });
  });
});

describe('reading an upstream stream', () => {
  it('ends without an error when its signal aborts while the upstream is silent', async () => {
    const silent = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('data: {"a":1}\n\n'));
      },
    });
    const cut = new AbortController();
    const events: string[] = [];
    const reading = (async () => {
      for await (const { data } of readEvents(silent, 60_000, cut.signal)) {
        events.push(data);
        cut.abort();
      }
    })();
    await expect(reading).resolves.toBeUndefined();
    expect(events).toEqual(['{"a":1}']);
  });

  it('ends at once when the signal was aborted before it started', async () => {
    const silent = new ReadableStream<Uint8Array>({ start() {} });
    const events = [];
    for await (const e of readEvents(silent, 60_000, AbortSignal.abort())) events.push(e);
    expect(events).toEqual([]);
  });
});

describe('STREAM_MAX_DURATION', () => {
  const catalog = ModelCatalog.parse(JSON.stringify({ regions: {}, models: [] }));
  const env = { SWITCHBOARD_MESH_SECRET: 'x'.repeat(32) };

  it('is 10 minutes unless set, and never 0', () => {
    expect(readDataPlaneConfig(catalog, env).streamMaxDurationMs).toBe(600_000);
    expect(readDataPlaneConfig(catalog, { ...env, STREAM_MAX_DURATION: '90s' }).streamMaxDurationMs).toBe(90_000);
    expect(() => readDataPlaneConfig(catalog, { ...env, STREAM_MAX_DURATION: '0s' })).toThrow(/STREAM_MAX_DURATION must be at least/);
  });
});
