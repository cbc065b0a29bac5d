import http from 'node:http';
import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintMeshToken, type RunningIdentity, startIdentity } from './helpers.js';

/**
 * Service ports (docs/api/internal-calls.md#ports-and-packages, ASVS 5.x, 13.x): at most 4 MiB of body after decompression, on every
 * protocol, and a call without a valid mesh token is refused without its body being read.
 */

const fourMiB = 4 * 1024 * 1024;
/** 256 MiB of zeros: about 256 KiB once gzipped. */
const bomb = gzipSync(Buffer.alloc(256 * 1024 * 1024), { level: 9 });
const rpcPath = '/switchboard.identity.v1.AuthService/GetJwks';

let service: RunningIdentity;
let token: string;

beforeAll(async () => {
  service = await startIdentity();
  token = await mintMeshToken('identity', { caller: 'gateway' });
});
afterAll(() => service?.stop());

/** One HTTP/1.1 request; resolves with the status, headers and body text. */
function h1(headers: Record<string, string>, body: Buffer | ((req: http.ClientRequest) => void)) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    let answered = false;
    const req = http.request(`${service.baseUrl}${rpcPath}`, { method: 'POST', headers, agent: false }, (res) => {
      answered = true;
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text });
      });
    });
    // Writing on after the server answered and closed fails (EPIPE): that is the point.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (typeof body === 'function') body(req);
    else req.end(body);
  });
}

/** One h2c request; resolves with the headers, trailers and body. */
function h2(headers: Record<string, string>, body: Buffer) {
  return new Promise<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const session = http2.connect(service.baseUrl);
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': rpcPath, ...headers });
    const chunks: Buffer[] = [];
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => (responseHeaders = h));
    stream.on('trailers', (t) => (trailers = t));
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      session.close();
      resolve({ headers: responseHeaders, trailers, body: Buffer.concat(chunks) });
    });
    stream.on('error', reject);
    stream.end(body);
  });
}

/** A gRPC frame: compressed flag, 4-byte length, payload. */
const grpcFrame = (payload: Buffer, compressed: boolean) => {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
};

async function stillServing() {
  const jwks = await h1({ 'content-type': 'application/json', authorization: `Bearer ${token}` }, Buffer.from('{}'));
  expect(jwks.status).toBe(200);
}

describe('request bodies on a service port', () => {
  it('refuses a gzip bomb over Connect (HTTP/1.1 and h2c) without inflating it', async () => {
    const h1Answer = await h1({ 'content-type': 'application/json', 'content-encoding': 'gzip', authorization: `Bearer ${token}` }, bomb);
    expect(h1Answer.status).toBe(429);
    expect(JSON.parse(h1Answer.text).code).toBe('resource_exhausted');
    const h2Answer = await h2({ 'content-type': 'application/proto', 'content-encoding': 'gzip', authorization: `Bearer ${token}` }, bomb);
    expect(h2Answer.headers[':status']).toBe(429);
    await stillServing();
  });

  it('refuses a gzip bomb over gRPC', async () => {
    const answer = await h2(
      { 'content-type': 'application/grpc', 'grpc-encoding': 'gzip', te: 'trailers', authorization: `Bearer ${token}` },
      grpcFrame(bomb, true),
    );
    const status = answer.trailers['grpc-status'] ?? answer.headers['grpc-status'];
    expect(status).toBe('8'); // RESOURCE_EXHAUSTED
    await stillServing();
  });

  it('refuses more than 4 MiB of plain body on the fast path and on connect-node', async () => {
    const tooBig = Buffer.alloc(fourMiB + 1024, 0x20);
    const fast = await h2({ 'content-type': 'application/proto', authorization: `Bearer ${token}` }, tooBig);
    expect(fast.headers[':status']).toBe(429);
    // JSON goes to connect-node. Over h2c: on HTTP/1.1 the server may answer and close before
    // the client has sent the rest, which the client sees as a broken pipe instead of the answer.
    const generic = await h2({ 'content-type': 'application/json', authorization: `Bearer ${token}` }, tooBig);
    expect(generic.headers[':status']).toBe(429);
    await stillServing();
  });

  it('refuses a call without a valid mesh token before reading its body: a body that never ends gets its answer', async () => {
    for (const authorization of [undefined, 'Bearer not-a-token']) {
      // HTTP/1.1: a first piece of body, then nothing and no end; the answer comes anyway.
      const answer = await h1({ 'content-type': 'application/json', ...(authorization ? { authorization } : {}) }, (req) => {
        req.write(Buffer.alloc(1024, 0x20));
      });
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.text).code).toBe('unauthenticated');
      // h2c: a body that keeps coming (a gzip bomb, for good measure) is answered at once.
      const session = http2.connect(service.baseUrl);
      const stream = session.request({
        ':method': 'POST',
        ':path': rpcPath,
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        ...(authorization ? { authorization } : {}),
      });
      let sent = 0;
      const pump = () => {
        if (stream.destroyed || sent >= 64 * 1024 * 1024) return;
        sent += 64 * 1024;
        if (stream.write(bomb.subarray(0, 64 * 1024))) setImmediate(pump);
        else stream.once('drain', pump);
      };
      pump();
      const status = await new Promise<number | undefined>((resolve, reject) => {
        stream.on('response', (headers) => resolve(headers[':status']));
        stream.on('error', reject);
      });
      stream.destroy();
      session.close();
      expect(status).toBe(401);
      expect(sent).toBeLessThan(64 * 1024 * 1024);
    }
    const grpcAnswer = await h2({ 'content-type': 'application/grpc', te: 'trailers' }, grpcFrame(bomb, true));
    expect(grpcAnswer.trailers['grpc-status'] ?? grpcAnswer.headers['grpc-status']).toBe('16'); // UNAUTHENTICATED
    await stillServing();
  });
});
