import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { Health, HealthCheckRequestSchema } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { createPeerClient, UnaryClient } from '@switchboard/runtime/clients';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A peer that dies in the middle of a call (kill -9) takes its connections with it: the kernel
 * resets them (RST) or closes them (FIN). The caller must see an outage (Unavailable: the
 * gateway's 503 + Retry-After), never connect-node's Aborted (the gateway's 409 conflict "read
 * ECONNRESET") nor the lean client's "HTTP NaN" (Unknown: a 500), both of which a chaos run
 * found. The peer here reads the call, then its connections go, as a dead process's do.
 */

type Ending = 'reset' | 'close';
const servers: http2.Http2Server[] = [];

/** An HTTP/2 server whose connections end (`ending`) as soon as a call arrives; its URL. */
async function dyingPeer(ending: Ending): Promise<string> {
  const server = http2.createServer();
  servers.push(server);
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => sockets.add(socket));
  server.on('stream', () => {
    for (const socket of sockets) {
      if (ending === 'reset') socket.resetAndDestroy();
      else socket.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let resetting: string;
let closing: string;

beforeAll(async () => {
  [resetting, closing] = await Promise.all([dyingPeer('reset'), dyingPeer('close')]);
});

afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
});

const failureOf = async (call: Promise<unknown>) =>
  ConnectError.from(
    await call.then(
      () => undefined,
      (err: unknown) => err,
    ),
  );

describe('a peer call whose connection goes mid-call', () => {
  it('peer client, connection reset: Unavailable, naming the service', async () => {
    const client = createPeerClient(Health, { name: 'identity', url: resetting }, new MeshTokens('a'.repeat(43)), { caller: 'gateway' });
    const failure = await failureOf(client.check({}));
    expect(Code[failure.code]).toBe('Unavailable');
    expect(failure.rawMessage).toMatch(/grpc\.health\.v1\.Health service dropped the call/);
  });

  it.each<[Ending, () => string]>([
    ['reset', () => resetting],
    ['close', () => closing],
  ])("the gateway's unary client, connection %s: Unavailable", async (_ending, url) => {
    const failure = await failureOf(new UnaryClient(url()).call(Health.method.check, create(HealthCheckRequestSchema), {}, 5000));
    expect(Code[failure.code]).toBe('Unavailable');
  });
});
