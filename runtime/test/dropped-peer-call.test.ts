import http2 from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from '@switchboard/contracts/grpc/health/v1/health_pb';
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
const openSockets = new Set<Socket>();

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

/**
 * An HTTP/2 server that refuses (RST_STREAM REFUSED_STREAM, as a server closing its sessions
 * does to a stream that crossed its GOAWAY) its first `refusals` calls and answers the rest
 * SERVING; its URL and the calls it refused and answered.
 */
async function refusingPeer(refusals: number): Promise<{ url: string; refused: number; answered: number }> {
  const server = http2.createServer();
  servers.push(server);
  server.on('connection', (socket: Socket) => openSockets.add(socket));
  const peer = { url: '', refused: 0, answered: 0 };
  server.on('stream', (stream) => {
    if (peer.refused < refusals) {
      peer.refused++;
      stream.on('error', () => undefined); // the server's side of the refusal, expected
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    peer.answered++;
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/proto' });
      stream.end(toBinary(HealthCheckResponseSchema, create(HealthCheckResponseSchema, { status: HealthCheckResponse_ServingStatus.SERVING })));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  peer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return peer;
}

let resetting: string;
let closing: string;

beforeAll(async () => {
  [resetting, closing] = await Promise.all([dyingPeer('reset'), dyingPeer('close')]);
});

afterAll(async () => {
  // The refusing peers' clients keep their sessions open; server.close() alone would wait for them.
  for (const socket of openSockets) socket.destroy();
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

describe('a peer call whose stream the peer refuses (it is closing)', () => {
  const peerClient = (url: string) => createPeerClient(Health, { name: 'keys', url }, new MeshTokens('a'.repeat(43)), { caller: 'data-plane' }).check({});
  const unaryClient = (url: string) => new UnaryClient(url).call(Health.method.check, create(HealthCheckRequestSchema), {}, 5000).then((r) => r.message);

  it.each([
    ['peer client', peerClient],
    ["the gateway's unary client", unaryClient],
  ])('%s: sent once more, and answered', async (_client, call) => {
    const peer = await refusingPeer(1);
    const answer = await call(peer.url);
    expect(HealthCheckResponse_ServingStatus[answer.status]).toBe('SERVING');
    expect([peer.refused, peer.answered]).toEqual([1, 1]);
  });

  it.each([
    ['peer client', peerClient],
    ["the gateway's unary client", unaryClient],
  ])('%s: refused twice, Unavailable (never Internal) and not sent a third time', async (_client, call) => {
    const peer = await refusingPeer(3);
    const failure = await failureOf(call(peer.url));
    expect(Code[failure.code]).toBe('Unavailable');
    expect([peer.refused, peer.answered]).toEqual([2, 0]);
  });
});
