import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { create, type DescMessage, type DescMethodUnary, fromBinary, type MessageInitShape, type MessageShape, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type HandlerContext, type Transport } from '@connectrpc/connect';
import { findTrailerError } from '@connectrpc/connect/protocol-grpc';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from '@switchboard/contracts/grpc/health/v1/health_pb';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { AccountSchema, AccountService } from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import { createPeerClient, UnaryClient } from '@switchboard/runtime/clients';
import { apiError } from '@switchboard/runtime/errors';
import { FastUnaryHandler } from '@switchboard/runtime/fast-unary';
import { createLogger } from '@switchboard/runtime/log';
import { type MeshClaims, MeshTokens } from '@switchboard/runtime/mesh-token';
import { Metrics } from '@switchboard/runtime/metrics';
import { callerOf, type RpcServer, requestIdOf, startRpcServer } from '@switchboard/runtime/server';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';

const secret = 'fast-unary-test-secret-0123456789abcdef';
const audience = 'identity';
const gatewayClaims: MeshClaims = { caller: 'gateway', principalId: 'usr_1', principalType: 'user', workspaceId: 'org_1', role: 'owner', sessionId: 'ses_1' };

const account = create(AccountSchema, {
  userId: 'usr_1',
  email: 'ada@example.com',
  emailVerified: true,
  fullName: 'Ada Lovelace',
  twoFactorEnabled: false,
  personalWorkspaceId: 'org_1',
  createdAt: timestampFromMs(Date.UTC(2024, 0, 2, 3, 4, 5, 678)),
});

const methods = AccountService.method;

/** What the handlers saw, per call. */
const seen: Array<{ rpc: string; caller: MeshClaims; requestId: string; protocol: string }> = [];
/** Called when activateTwoFactor starts. */
let onBusyStart: (() => void) | undefined;
/** Why each slow call's signal fired. */
const slowAborts: Array<{ requestId: string; reason: unknown }> = [];

/** The test service: switchboard.identity.v1.AccountService with a few behaviours. */
const implementation = {
  getAccount(_req: unknown, ctx: HandlerContext) {
    seen.push({ rpc: 'GetAccount', caller: callerOf(ctx), requestId: requestIdOf(ctx), protocol: ctx.protocolName });
    ctx.responseHeader.set('sb-http-status', '200');
    return account;
  },
  updateAccount(req: MessageShape<typeof methods.updateAccount.input>, ctx: HandlerContext) {
    seen.push({ rpc: 'UpdateAccount', caller: callerOf(ctx), requestId: requestIdOf(ctx), protocol: ctx.protocolName });
    if (req.fullName === 'break the rule') {
      throw apiError(Code.FailedPrecondition, 'some_rule', 'msg', { field: 'full_name', httpStatus: 422, metadata: { a: 1 } });
    }
    // A plain init object, not a message: every path must turn it into one.
    const { $typeName: _typeName, ...plain } = account;
    return { ...plain, fullName: req.fullName, emailVerified: false };
  },
  /** Slow unless the call is cancelled (it honours ctx.signal). */
  async getTwoFactorStatus(_req: unknown, ctx: HandlerContext) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 3_000);
      ctx.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          slowAborts.push({ requestId: requestIdOf(ctx), reason: ctx.signal.reason });
          reject(ctx.signal.reason);
        },
        { once: true },
      );
    });
    return { enabled: true };
  },
  /** An unexpected failure: its text must not reach the caller. */
  enrollTwoFactor() {
    throw new Error('secret internals: connection string postgres://admin:hunter2@db');
  },
  /** Fails with transport metadata (e.g. Retry-After for a throttled login). */
  regenerateRecoveryCodes() {
    throw new ConnectError('slow down', Code.ResourceExhausted, { 'retry-after': '30' }, [
      { desc: ErrorDetailSchema, value: { code: 'rate_limited', httpStatus: 429 } },
    ]);
  },
  /** Takes a moment (work in progress while the server shuts down). */
  async activateTwoFactor() {
    onBusyStart?.();
    await new Promise((resolve) => setTimeout(resolve, 150));
    return { recoveryCodes: ['code-1'] };
  },
  /** Sets a response header, then fails. */
  disableTwoFactor(_req: unknown, ctx: HandlerContext) {
    ctx.responseHeader.set('x-handler-header', 'set-before-failing');
    throw apiError(Code.PermissionDenied, 'reauthentication_failed', 'Wrong code.');
  },
  // changePassword and the rest stay unimplemented.
};

let server: RpcServer;
let baseUrl: string;
let mintTokens: MeshTokens;
let unary: UnaryClient;
let grpcJs: grpc.Client;
/**
 * HTTP/1.1 clients get their own agent, destroyed at the end: the server's close() cannot end
 * idle HTTP/1.1 keep-alive connections itself (see the close() tests below).
 */
const h1Agent = new http.Agent({ keepAlive: true });
const transports: Record<string, Transport> = {};
const handleSpy = vi.spyOn(FastUnaryHandler.prototype, 'handle');
/** How many requests the fast path has taken so far. */
const fastCalls = () => handleSpy.mock.results.filter((result) => result.type === 'return' && result.value === true).length;

const metrics = new Metrics(audience);

/** A server of the AccountService above on `port` (any free one by default), as every test here starts it. */
const startAccountServer = (port = 0, serverMetrics = new Metrics(audience)) =>
  startRpcServer({
    name: audience,
    port,
    host: '127.0.0.1',
    routes: (router) => router.service(AccountService, implementation as never),
    meshTokens: new MeshTokens(secret),
    log: createLogger('fast-unary-test', 'silent'),
    metrics: serverMetrics,
    isHealthy: async () => true,
  });

beforeAll(async () => {
  server = await startAccountServer(0, metrics);
  baseUrl = `http://127.0.0.1:${server.port}`;
  mintTokens = new MeshTokens(secret);
  unary = new UnaryClient(baseUrl);
  transports.connectBinaryH2 = createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true });
  transports.connectJsonH1 = createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: false, nodeOptions: { agent: h1Agent } });
  transports.grpc = createGrpcTransport({ baseUrl });
  transports.grpcWeb = createGrpcWebTransport({ baseUrl, httpVersion: '1.1', nodeOptions: { agent: h1Agent } });
  grpcJs = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
});

afterAll(async () => {
  unary?.close();
  grpcJs?.close();
  h1Agent.destroy();
  await server?.close(1_000);
  handleSpy.mockRestore();
});

beforeEach(() => {
  seen.length = 0;
  slowAborts.length = 0;
});

interface CallOptions {
  /** The bearer token; null sends no Authorization header. Default: a valid token for identity. */
  token?: string | null;
  timeoutMs?: number;
  requestId?: string;
}

interface Outcome<O extends DescMessage = DescMessage> {
  message: MessageShape<O>;
  header: Headers;
}

type Call = <I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  input: MessageInitShape<I>,
  options: CallOptions,
) => Promise<Outcome<O>>;

async function requestHeaders(options: CallOptions): Promise<Record<string, string>> {
  const token = options.token === undefined ? await mintTokens.mint(audience, gatewayClaims) : options.token;
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (options.requestId) headers['x-request-id'] = options.requestId;
  return headers;
}

function viaTransport(name: string): Call {
  return async (method, input, options) => {
    const response = await transports[name].unary(method, undefined, options.timeoutMs ?? 5_000, await requestHeaders(options), input);
    return { message: response.message, header: response.header };
  };
}

const viaUnaryClient: Call = async (method, input, options) => {
  const { message, header } = await unary.call(method, create(method.input, input), await requestHeaders(options), options.timeoutMs ?? 5_000);
  const headers = new Headers();
  for (const [name, value] of Object.entries(header)) if (!name.startsWith(':') && value !== undefined) headers.set(name, String(value));
  return { message, header: headers };
};

/** A plain @grpc/grpc-js client (docs/api/overview.md#protocols), with its error turned into a ConnectError for comparison. */
const viaGrpcJs: Call = async (method, input, options) => {
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(await requestHeaders(options))) metadata.set(name, value);
  const header = new Headers();
  return new Promise((resolve, reject) => {
    const call = grpcJs.makeUnaryRequest(
      `/${method.parent.typeName}/${method.name}`,
      (value: MessageShape<typeof method.input>) => Buffer.from(toBinary(method.input, value)),
      (bytes: Buffer) => fromBinary(method.output, bytes),
      create(method.input, input),
      metadata,
      { deadline: Date.now() + (options.timeoutMs ?? 5_000) },
      (err, message) => {
        if (!err) {
          resolve({ message: message!, header });
          return;
        }
        // grpc-js undoes the percent-encoding of grpc-message with decodeURI, which leaves e.g. %3A
        // (connect-es encodes with encodeURIComponent): finish the job before comparing.
        const details = decodeURIComponent(err.details);
        const trailer = new Headers({ 'grpc-status': String(err.code), 'grpc-message': encodeURIComponent(details) });
        for (const [name, values] of Object.entries(err.metadata.getMap())) {
          trailer.set(name, Buffer.isBuffer(values) ? values.toString('base64') : String(values));
        }
        const error = findTrailerError(trailer) ?? new ConnectError(details, err.code as number as Code);
        // Like connect-node's clients: an error's metadata holds the response headers and trailers.
        for (const source of [header, trailer]) {
          source.forEach((value, name) => {
            if (!error.metadata.has(name)) error.metadata.set(name, value);
          });
        }
        reject(error);
      },
    );
    call.on('metadata', (received) => {
      for (const [name, value] of Object.entries(received.getMap())) header.set(name, String(value));
    });
  });
};

interface Path {
  name: string;
  /** Whether the fast path must serve it. */
  fast: boolean;
  call: Call;
}

const paths: Path[] = [
  { name: 'UnaryClient (binary Connect, HTTP/2)', fast: true, call: viaUnaryClient },
  { name: 'connect-node binary over HTTP/2', fast: true, call: viaTransport('connectBinaryH2') },
  { name: 'connect-node JSON over HTTP/1.1', fast: false, call: viaTransport('connectJsonH1') },
  { name: 'connect-node gRPC', fast: false, call: viaTransport('grpc') },
  { name: 'connect-node gRPC-Web over HTTP/1.1', fast: false, call: viaTransport('grpcWeb') },
  { name: '@grpc/grpc-js', fast: false, call: viaGrpcJs },
];

/** The error a call fails with (fails the test when it succeeds). */
async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  const result = await promise.then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  );
  if (!('err' in result)) throw new Error(`expected the call to fail, got ${JSON.stringify(result.value, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
  expect(result.err).toBeInstanceOf(ConnectError);
  return result.err as ConnectError;
}

/** The parts of an error every path must agree on. */
const errorShape = (err: ConnectError) => ({
  code: Code[err.code],
  message: err.rawMessage,
  details: err
    .findDetails(ErrorDetailSchema)
    .map((detail) => ({ code: detail.code, field: detail.field, httpStatus: detail.httpStatus, metadata: detail.metadata })),
});

describe.each(paths)('an RPC server called through $name', (path) => {
  /** Runs a call and checks which path served it. */
  async function tracked<T>(run: () => Promise<T>, fast = path.fast): Promise<T> {
    const before = fastCalls();
    try {
      return await run();
    } finally {
      expect(fastCalls() - before, fast ? 'served by the fast path' : 'served by connect-node').toBe(fast ? 1 : 0);
    }
  }

  it('answers with the message, the verified caller and the request id', async () => {
    const { message, header } = await tracked(() => path.call(methods.getAccount, {}, { requestId: 'req_fixed123' }));
    expect(message).toEqual(account);
    expect(seen).toEqual([{ rpc: 'GetAccount', caller: { ...gatewayClaims, keyId: undefined }, requestId: 'req_fixed123', protocol: expect.any(String) }]);
    expect(header.get('sb-http-status')).toBe('200');
  });

  it('gives a new request id when the caller sends none', async () => {
    await tracked(() => path.call(methods.getAccount, {}, {}));
    expect(seen[0].requestId).toMatch(/^req_[0-9A-Za-z]{22}$/);
  });

  it('decodes the request and completes a plain object returned by the handler', async () => {
    const { message } = await tracked(() => path.call(methods.updateAccount, { fullName: 'Grace Hopper' }, {}));
    expect(message).toEqual(create(AccountSchema, { ...account, fullName: 'Grace Hopper', emailVerified: false }));
  });

  it('passes an apiError through with its code, message and ErrorDetail', async () => {
    const err = await tracked(() => failure(path.call(methods.updateAccount, { fullName: 'break the rule' }, {})));
    expect(errorShape(err)).toEqual({
      code: 'FailedPrecondition',
      message: 'msg',
      details: [{ code: 'some_rule', field: 'full_name', httpStatus: 422, metadata: { a: 1 } }],
    });
  });

  it('passes error metadata (Retry-After) through', async () => {
    const err = await tracked(() => failure(path.call(methods.regenerateRecoveryCodes, {}, {})));
    expect(errorShape(err)).toEqual({
      code: 'ResourceExhausted',
      message: 'slow down',
      details: [{ code: 'rate_limited', field: '', httpStatus: 429, metadata: undefined }],
    });
    expect(err.metadata.get('retry-after')).toBe('30');
  });

  it('keeps response headers the handler set before failing', async () => {
    const err = await tracked(() => failure(path.call(methods.disableTwoFactor, {}, {})));
    expect(err.code).toBe(Code.PermissionDenied);
    expect(err.metadata.get('x-handler-header')).toBe('set-before-failing');
  });

  it('hides an unexpected failure behind Internal', async () => {
    const err = await tracked(() => failure(path.call(methods.enrollTwoFactor, { password: 'a password' }, {})));
    expect(err.code).toBe(Code.Internal);
    expect(err.rawMessage).not.toMatch(/hunter2|postgres|secret internals/);
    expect(err.findDetails(ErrorDetailSchema)).toEqual([]);
  });

  it('refuses a call without a token, with a malformed header or with a token for another service', async () => {
    for (const token of [
      null,
      '',
      'not-a-jwt',
      await mintTokens.mint('keys', gatewayClaims),
      await new MeshTokens('another-secret-0123456789abcdef-xyz').mint(audience, gatewayClaims),
    ]) {
      // Refused before its body is read, so never on the fast path (which reads the body first).
      const err = await tracked(() => failure(path.call(methods.getAccount, {}, { token })), false);
      expect(err.code, `token ${token}`).toBe(Code.Unauthenticated);
    }
    expect(seen).toEqual([]);
  });

  it('answers Unimplemented for a method the service left out', async () => {
    // Unimplemented methods are never registered on the fast path.
    const err = await tracked(() => failure(path.call(methods.changePassword, { currentPassword: 'a', newPassword: 'b' }, {})), false);
    expect(err.code).toBe(Code.Unimplemented);
  });

  it('answers DeadlineExceeded when the handler outlives the deadline', async () => {
    const started = performance.now();
    const err = await tracked(() => failure(path.call(methods.getTwoFactorStatus, {}, { timeoutMs: 100 })));
    expect(err.code).toBe(Code.DeadlineExceeded);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('answers the health check without a token', async () => {
    const { message } = await tracked(() => path.call(Health.method.check, { service: '' }, { token: null }), false);
    expect(message.status).toBe(ServingStatus.SERVING);
    const liveness = await path.call(Health.method.check, { service: 'liveness' }, { token: null });
    expect(liveness.message.status).toBe(ServingStatus.SERVING);
  });
});

describe('every path agrees', () => {
  it('gives identical answers and identical errors on all paths', async () => {
    const answers = [];
    const errors = [];
    for (const path of paths) {
      answers.push((await path.call(methods.getAccount, {}, {})).message);
      errors.push(errorShape(await failure(path.call(methods.updateAccount, { fullName: 'break the rule' }, {}))));
      errors.push(errorShape(await failure(path.call(methods.getAccount, {}, { token: null }))));
    }
    for (const answer of answers) expect(answer).toEqual(answers[0]);
    for (let i = 0; i < errors.length; i += 2) {
      expect(errors[i]).toEqual(errors[0]);
      expect(errors[i + 1]).toEqual(errors[1]);
    }
  });
});

describe('RPC metrics', () => {
  /** How many calls of an RPC with this outcome the server counted. */
  const counted = async (rpc: string, code: string) => {
    const histogram = await metrics.registry.getSingleMetric('rpc_server_duration_seconds')!.get();
    return (
      histogram.values.find(
        (v) => (v as { metricName?: string }).metricName === 'rpc_server_duration_seconds_count' && v.labels.rpc === rpc && v.labels.code === code,
      )?.value ?? 0
    );
  };

  it('counts every call with its outcome, on the fast path and through connect alike', async () => {
    const ok = await counted('AccountService/GetAccount', 'ok');
    const refused = await counted('AccountService/UpdateAccount', 'FailedPrecondition');
    for (const path of paths) {
      await path.call(methods.getAccount, {}, {});
      await failure(path.call(methods.updateAccount, { fullName: 'break the rule' }, {}));
    }
    expect(await counted('AccountService/GetAccount', 'ok')).toBe(ok + paths.length);
    expect(await counted('AccountService/UpdateAccount', 'FailedPrecondition')).toBe(refused + paths.length);
    expect(await metrics.registry.metrics()).toContain(`component="${audience}"`);
  });
});

describe('peer clients', () => {
  it('createPeerClient adds a mesh token for the target and takes the fast path', async () => {
    const client = createPeerClient(AccountService, { name: audience, url: baseUrl }, mintTokens, gatewayClaims);
    const before = fastCalls();
    expect(await client.getAccount({})).toEqual(account);
    expect(fastCalls() - before).toBe(1);
    expect(seen.map((entry) => entry.caller)).toEqual([{ ...gatewayClaims, keyId: undefined }]);
    const err = await failure(client.updateAccount({ fullName: 'break the rule' }));
    expect(errorShape(err).details).toEqual([{ code: 'some_rule', field: 'full_name', httpStatus: 422, metadata: { a: 1 } }]);
  });

  it('createPeerClient for another target mints a token this server refuses', async () => {
    const client = createPeerClient(AccountService, { name: 'keys', url: baseUrl }, mintTokens, gatewayClaims);
    expect((await failure(client.getAccount({}))).code).toBe(Code.Unauthenticated);
  });

  it('UnaryClient fails fast with Unavailable when nothing listens, then reaches the peer once it is up', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as net.AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const client = new UnaryClient(`http://127.0.0.1:${port}`);
    try {
      const started = performance.now();
      const err = await failure(client.call(methods.getAccount, create(methods.getAccount.input), await requestHeaders({}), 5_000));
      expect(err.code).toBe(Code.Unavailable);
      expect(performance.now() - started).toBeLessThan(2_000);
      // Once the peer is up, the same client reaches it (it kept no dead session).
      const peer = await startAccountServer(port);
      try {
        const { message } = await client.call(methods.getAccount, create(methods.getAccount.input), await requestHeaders({}), 5_000);
        expect(message).toEqual(account);
      } finally {
        client.close();
        await peer.close(100);
      }
    } finally {
      client.close();
    }
  });
});

describe('the fast path on the wire', () => {
  /** One raw HTTP/2 request; resolves with status, headers and body. */
  function rawH2(path: string, headers: Record<string, string>, body: Uint8Array) {
    return new Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const session = http2.connect(baseUrl);
      session.on('error', reject);
      const stream = session.request({ ':method': 'POST', ':path': path, ...headers });
      const chunks: Buffer[] = [];
      let responseHeaders: http2.IncomingHttpHeaders = {};
      stream.on('response', (h) => (responseHeaders = h));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        session.close();
        resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, body: Buffer.concat(chunks) });
      });
      stream.on('error', reject);
      stream.end(body);
    });
  }

  /** One raw HTTP/1.1 request on its own connection (Connection: close). */
  function rawH1(path: string, headers: Record<string, string>, body: Uint8Array) {
    return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const req = http.request(`${baseUrl}${path}`, { method: 'POST', headers, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  it('enforces connect-timeout-ms on the server, aborting the handler', async () => {
    const before = fastCalls();
    const token = await mintTokens.mint(audience, gatewayClaims);
    const started = performance.now();
    // No client-side timer here: the answer must come from the server's own deadline.
    const response = await rawH2(
      '/switchboard.identity.v1.AccountService/GetTwoFactorStatus',
      {
        'content-type': 'application/proto',
        'connect-protocol-version': '1',
        'connect-timeout-ms': '100',
        authorization: `Bearer ${token}`,
        'x-request-id': 'req_server_deadline',
      },
      new Uint8Array(0),
    );
    expect(fastCalls() - before).toBe(1);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(response.status).toBe(504);
    expect(response.headers['content-type']).toBe('application/json');
    expect(JSON.parse(response.body.toString())).toMatchObject({ code: 'deadline_exceeded' });
    const aborted = slowAborts.filter((entry) => entry.requestId === 'req_server_deadline');
    expect(aborted).toHaveLength(1);
    expect(aborted[0].reason).toBeInstanceOf(ConnectError);
    expect((aborted[0].reason as ConnectError).code).toBe(Code.DeadlineExceeded);
  });

  it('answers an undecodable body with an error before the handler runs', async () => {
    const token = await mintTokens.mint(audience, gatewayClaims);
    const garbage = new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]); // field 1, length far past the end
    const headers = { 'content-type': 'application/proto', 'connect-protocol-version': '1', authorization: `Bearer ${token}` };
    const before = fastCalls();
    const fast = await rawH2('/switchboard.identity.v1.AccountService/UpdateAccount', headers, garbage);
    expect(fastCalls() - before).toBe(1);
    const generic = await rawH1('/switchboard.identity.v1.AccountService/UpdateAccount', headers, garbage);
    // The fast path calls it invalid_argument; connect-node's generic handler says internal
    // (its binary parse errors are Code.Internal). Either way the implementation never runs.
    expect(fast.status).toBe(400);
    expect(JSON.parse(fast.body.toString()).code).toBe('invalid_argument');
    expect(generic.status).toBeGreaterThanOrEqual(400);
    expect(JSON.parse(generic.body.toString()).code).toMatch(/^(invalid_argument|internal)$/);
    expect(seen).toEqual([]);
  });

  it('answers the binary form the generic handler gives, byte for byte', async () => {
    const token = await mintTokens.mint(audience, gatewayClaims);
    const headers = { 'content-type': 'application/proto', 'connect-protocol-version': '1', authorization: `Bearer ${token}` };
    const fast = await rawH2('/switchboard.identity.v1.AccountService/GetAccount', headers, new Uint8Array(0));
    const generic = await rawH1('/switchboard.identity.v1.AccountService/GetAccount', headers, new Uint8Array(0));
    expect(fast.status).toBe(200);
    expect(generic.status).toBe(200);
    expect(fast.headers['content-type']).toBe('application/proto');
    expect(generic.headers['content-type']).toBe('application/proto');
    expect(generic.body.equals(fast.body)).toBe(true);
    expect(fast.headers['sb-http-status']).toBe('200');
    expect(generic.headers['sb-http-status']).toBe('200');
    expect(fromBinary(AccountSchema, fast.body)).toEqual(account);
  });
});

describe('RpcServer.close', () => {
  /** Whether `promise` settles within `ms` (a bound on how long close() may take, not a wait for it). */
  const settlesWithin = (promise: Promise<unknown>, ms: number) =>
    Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

  /** A complete HTTP/1.1 health call on its own connection. */
  const healthOverH1 = (port: number, agent: http.Agent | false) =>
    new Promise<number>((resolve, reject) => {
      const req = http.request(
        `http://127.0.0.1:${port}/grpc.health.v1.Health/Check`,
        { method: 'POST', headers: { 'content-type': 'application/json' }, agent },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.end('{}');
    });

  it('lets an in-flight call finish, then closes', async () => {
    const one = await startAccountServer();
    const client = new UnaryClient(`http://127.0.0.1:${one.port}`);
    try {
      const started = new Promise<void>((resolve) => (onBusyStart = resolve));
      const call = client.call(methods.activateTwoFactor, create(methods.activateTwoFactor.input, { code: '123456' }), await requestHeaders({}), 5_000);
      await started;
      const closed = one.close(5_000);
      expect((await call).message.recoveryCodes).toEqual(['code-1']);
      expect(await settlesWithin(closed, 2_000)).toBe(true);
    } finally {
      onBusyStart = undefined;
      client.close();
    }
  });

  it('ends idle HTTP/1.1 keep-alive connections within the grace period', async () => {
    const one = await startAccountServer();
    const agent = new http.Agent({ keepAlive: true });
    let closed: Promise<void> | undefined;
    try {
      expect(await healthOverH1(one.port, agent)).toBe(200);
      closed = one.close(50);
      expect(await settlesWithin(closed, 600)).toBe(true);
    } finally {
      agent.destroy();
      await (closed ?? one.close(0));
    }
  });

  it('ends a connection that never sends a byte within the grace period', async () => {
    const one = await startAccountServer();
    const silent = net.connect(one.port, '127.0.0.1');
    let closed: Promise<void> | undefined;
    try {
      await new Promise<void>((resolve, reject) => silent.once('connect', resolve).once('error', reject));
      // A full call on a later connection: the server has accepted the silent one by now.
      expect(await healthOverH1(one.port, false)).toBe(200);
      closed = one.close(50);
      expect(await settlesWithin(closed, 600)).toBe(true);
    } finally {
      silent.destroy();
      await (closed ?? one.close(0));
    }
  });
});
