import http2 from 'node:http2';
import { type DescMessage, type DescMethodUnary, type DescService, fromBinary, type MessageShape, toBinary } from '@bufbuild/protobuf';
import { type Client, Code, ConnectError, createClient, type Interceptor, type Transport } from '@connectrpc/connect';
import { codeFromHttpStatus, errorFromJsonBytes } from '@connectrpc/connect/protocol-connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { MeshClaims, MeshTokens } from './mesh-token.js';
import { injectTraceContext } from './trace-context.js';

/**
 * An HTTP/2 Connect transport to a peer. Pings keep the session honest across peer restarts
 * (connect-es #1561), and every call has a deadline.
 */
export function createPeerTransport(baseUrl: string, options: { interceptors?: Interceptor[]; timeoutMs?: number } = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: process.env.PEER_HTTP === '1.1' ? '1.1' : '2',
    useBinaryFormat: true,
    pingIntervalMs: 5_000,
    pingTimeoutMs: 3_000,
    idleConnectionTimeoutMs: 60_000,
    defaultTimeoutMs: options.timeoutMs ?? 10_000,
    interceptors: [unavailableWhenDropped, ...(options.interceptors ?? [])],
  });
}

/** Node's codes for a call whose connection or stream went away under it. */
const droppedCodes = new Set(['ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED', 'ERR_HTTP2_INVALID_STREAM', 'ERR_HTTP2_STREAM_ERROR', 'ERR_HTTP2_GOAWAY_SESSION']);

const causes = function* (err: unknown): Generator<NodeJS.ErrnoException> {
  for (let cause = err; cause instanceof Error; cause = cause.cause) yield cause;
};

/**
 * The peer never saw the call: it reset the stream with REFUSED_STREAM (a server that is
 * closing, whose GOAWAY crossed our new stream, or one at its stream limit; HTTP/2 guarantees
 * such a stream was not processed, RFC 9113 §8.7), or the session had already received GOAWAY
 * when the stream was to open. A unary call is then safe to send once more, even one that
 * writes. A rolling restart found refused streams answered as 500.
 */
function wasNotProcessed(err: unknown): boolean {
  for (const cause of causes(err)) {
    if (cause.code === 'ERR_HTTP2_GOAWAY_SESSION') return true;
    if (cause.code === 'ERR_HTTP2_STREAM_ERROR' && cause.message.includes('NGHTTP2_REFUSED_STREAM')) return true;
  }
  return false;
}

/**
 * A peer that dies mid-call (a crash, kill -9) resets the connection; connect-node reports that
 * as Aborted, which the gateway would answer as 409 conflict with "read ECONNRESET" (a chaos run
 * found it), and a stream the peer reset or refused as Internal (a 500). Both are an outage of
 * the peer: Unavailable (503 + Retry-After). Errors the peer itself sent have no Node error as
 * their cause and pass unchanged. A unary call the peer never saw is sent once more (on a new
 * session if the old one is going away); failing again, it is an outage too.
 */
const unavailableWhenDropped: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (!req.stream && wasNotProcessed(err)) {
      try {
        return await next(req);
      } catch (retryErr) {
        throw unavailableIfDropped(retryErr, req.service.typeName);
      }
    }
    throw unavailableIfDropped(err, req.service.typeName);
  }
};

function unavailableIfDropped(err: unknown, serviceName: string): unknown {
  const error = ConnectError.from(err);
  if (error.code !== Code.Aborted && error.code !== Code.Internal) return err;
  for (const cause of causes(error.cause)) {
    if (droppedCodes.has(cause.code ?? '')) {
      return new ConnectError(`the ${serviceName} service dropped the call (${cause.message})`, Code.Unavailable, undefined, undefined, err);
    }
  }
  return err;
}

/** A client for a peer service whose calls carry a mesh token naming this component. */
export function createPeerClient<T extends DescService>(
  service: T,
  target: { name: string; url: string },
  meshTokens: MeshTokens,
  claims: MeshClaims,
): Client<T> {
  const addToken: Interceptor = (next) => async (req) => {
    req.header.set('authorization', `Bearer ${await meshTokens.mint(target.name, claims)}`);
    // HTTP/2 is not instrumented: the call carries the trace context itself.
    injectTraceContext(req.header);
    return next(req);
  };
  return createClient(service, createPeerTransport(target.url, { interceptors: [addToken] }));
}

/**
 * A lean client for unary calls with the Connect protocol (binary) over one HTTP/2 session:
 * the gateway's hot path. It does what the generic transport does for a unary call (timeout
 * header and deadline, error JSON with details, metadata) with less machinery per call.
 */
const pingIntervalMs = 5_000;
const pingTimeoutMs = 3_000;
const idleSessionMs = 60_000;

type UnaryCall<I extends DescMessage, O extends DescMessage> = [
  method: DescMethodUnary<I, O>,
  input: MessageShape<I>,
  header: Record<string, string>,
  timeoutMs: number,
  signal?: AbortSignal,
];
type UnaryAnswer<O extends DescMessage> = { message: MessageShape<O>; header: http2.IncomingHttpHeaders };

export class UnaryClient {
  private session?: http2.ClientHttp2Session;

  constructor(private readonly baseUrl: string) {}

  /** One call; a call the peer never saw (see wasNotProcessed) is sent once more. */
  async call<I extends DescMessage, O extends DescMessage>(...args: UnaryCall<I, O>): Promise<UnaryAnswer<O>> {
    try {
      return await this.send(...args);
    } catch (err) {
      if (!wasNotProcessed(err)) throw err;
      return this.send(...args);
    }
  }

  private send<I extends DescMessage, O extends DescMessage>(...[method, input, header, timeoutMs, signal]: UnaryCall<I, O>): Promise<UnaryAnswer<O>> {
    return new Promise((resolve, reject) => {
      let stream: http2.ClientHttp2Stream;
      try {
        const requestHeader: Record<string, string> = {
          ':method': 'POST',
          ':path': `/${method.parent.typeName}/${method.name}`,
          'content-type': 'application/proto',
          'connect-protocol-version': '1',
          'connect-timeout-ms': String(timeoutMs),
          ...header,
        };
        injectTraceContext(requestHeader);
        stream = this.connect().request(requestHeader);
      } catch (err) {
        reject(ConnectError.from(err, Code.Unavailable));
        return;
      }
      const fail = (err: ConnectError) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(err);
      };
      const timer = setTimeout(() => fail(new ConnectError(`no answer within ${timeoutMs} ms`, Code.DeadlineExceeded)), timeoutMs);
      const onAbort = () => fail(new ConnectError('the call was cancelled', Code.Canceled));
      signal?.addEventListener('abort', onAbort, { once: true });
      let responseHeader: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (headers) => (responseHeader = headers));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (err) => fail(ConnectError.from(err, Code.Unavailable)));
      stream.on('end', () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const body = Buffer.concat(chunks);
        const status = Number(responseHeader[':status']);
        // Ended without an answer: the peer's connection went away mid-call (it died, kill -9).
        if (Number.isNaN(status)) {
          reject(new ConnectError('the service closed the call without an answer', Code.Unavailable));
          return;
        }
        if (status === 200) {
          try {
            resolve({ message: fromBinary(method.output, body), header: responseHeader });
          } catch (err) {
            reject(ConnectError.from(err, Code.Internal));
          }
          return;
        }
        const metadata = new Headers();
        for (const [name, value] of Object.entries(responseHeader)) {
          if (!name.startsWith(':') && value !== undefined) metadata.set(name, Array.isArray(value) ? value.join(', ') : String(value));
        }
        const fallback = new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status), metadata);
        try {
          reject(errorFromJsonBytes(body, metadata, fallback));
        } catch {
          reject(fallback);
        }
      });
      stream.end(toBinary(method.input, input));
    });
  }

  private connect(): http2.ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const session = http2.connect(this.baseUrl);
    session.on('error', () => undefined); // each stream reports its own failure
    const forget = () => {
      if (this.session === session) this.session = undefined;
    };
    session.on('close', forget);
    session.on('goaway', forget);
    session.unref();
    // A peer that vanished without closing the connection must not keep a dead session in use
    // (connect-es #1561): a ping unanswered within its timeout ends the session, and the next
    // call connects anew.
    const pinger = setInterval(() => {
      // Destroyed (a ping unanswered, the peer gone) before its 'close' came: ping() would throw
      // out of this timer and end the process (a money-path chaos run lost the gateway so).
      if (session.destroyed) {
        clearInterval(pinger);
        return;
      }
      const timeout = setTimeout(() => session.destroy(), pingTimeoutMs);
      const sent = session.ping((err) => {
        clearTimeout(timeout);
        if (err) session.destroy();
      });
      if (!sent) clearTimeout(timeout);
    }, pingIntervalMs);
    pinger.unref();
    session.once('close', () => clearInterval(pinger));
    session.setTimeout(idleSessionMs, () => session.close());
    this.session = session;
    return session;
  }

  close(): void {
    this.session?.close();
  }
}
