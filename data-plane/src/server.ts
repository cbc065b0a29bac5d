import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError } from '@switchboard/runtime/api-error';
import { answerClientError } from '@switchboard/runtime/client-error';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import { readBody } from '@switchboard/runtime/http-body';
import { newId } from '@switchboard/runtime/ids';
import type { Logger } from '@switchboard/runtime/log';
import type { Metrics } from '@switchboard/runtime/metrics';
import { parseChatRequest, unsupportedParameter } from './chat-request.js';
import type { Completions, Reply } from './completions.js';
import { toErrorResponse } from './openai-error.js';

/**
 * The HTTP surface of the data plane: `POST /v1/chat/completions` and `GET /v1/models`
 * (OpenAI-compatible, API keys only), `/healthz`. The gateway forwards those paths here as
 * streams; this server reads and answers them and leaves the decisions to `Completions`.
 */

export const maxBodyBytes = 1024 * 1024;
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;
/** The shape of an API key: sb_ and 49 base62 characters (the format of docs/api/keys.md#the-full-key, checksum included). */
const keyShape = /^sb_[A-Za-z0-9]{49}$/;

/**
 * The requests Node refuses before any handler runs (malformed, headers too large, too slow), for
 * the server's 'clientError': the front door's error body (OpenAI's `type` and `param` included)
 * and `Cache-Control: no-store`, as its other errors (docs/conventions.md#errors).
 */
export function answerFrontDoorClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  answerClientError(err, socket, (error, requestId) => toErrorResponse(error, requestId).body);
}

export interface ServerDeps {
  log: Logger;
  /** Where each request's latency and status are counted. */
  metrics: Metrics;
  completions: Completions;
  /** Where a shutdown stands: unready (/healthz 503) first, then draining (answers close their connection). */
  lifecycle: { ready: boolean; draining: boolean };
  /** Whether NATS refuses the data plane's credentials: /readyz answers 503 while it does (docs/operations.md#nats-credentials). */
  nats?: { refused: boolean };
  /**
   * UPSTREAM_IDLE_TIMEOUT: how long a stream's client may leave what was written unread before it
   * is dropped (main.ts passes config.idleTimeoutMs). Unset, a client that stops reading holds its
   * stream, and the upstream call behind it, for as long as its connection stays open.
   */
  idleTimeoutMs?: number;
}

/**
 * The time a request spends in the platform, the upstream's excluded: X-Service-Overhead-Ms of
 * every answer (docs/api/front-door.md#responses). It runs from the request's arrival to its
 * response headers, so a stream's counts what came before its first byte.
 */
class Overhead {
  readonly started = performance.now();
  /** The upstream's part so far. */
  upstreamMs = 0;
  /** The X-Service-Overhead-Ms the answer's headers carried, once written. */
  answered?: string;

  async upstream<T>(work: () => Promise<T>): Promise<T> {
    const from = performance.now();
    try {
      return await work();
    } finally {
      this.upstreamMs += performance.now() - from;
    }
  }

  /** Milliseconds to the microsecond: a request's own share is often well under one. */
  get ms(): string {
    return this.msAt(performance.now());
  }

  msAt(now: number): string {
    return (now - this.started - this.upstreamMs).toFixed(3);
  }
}

/**
 * Every answer's headers go through here, so that each carries its overhead. The upstream's part
 * goes too, for the gateway: it answers with the platform's whole overhead, its own hop included
 * (gateway/src/data-plane-proxy.ts), and does not pass this one on.
 */
function writeHead(res: http.ServerResponse, overhead: Overhead, status: number, headers: Record<string, string>): http.ServerResponse {
  overhead.answered = overhead.ms;
  return res.writeHead(status, { ...headers, 'x-service-overhead-ms': overhead.answered, 'x-service-upstream-ms': overhead.upstreamMs.toFixed(3) });
}

/**
 * A JSON answer in one piece, with its length: headers written first would otherwise frame it in
 * chunks, with a last empty chunk the client (and the gateway) must wait for.
 */
function sendJson(res: http.ServerResponse, overhead: Overhead, status: number, headers: Record<string, string>, json: string): void {
  writeHead(res, overhead, status, { 'content-type': 'application/json', ...headers, 'content-length': String(Buffer.byteLength(json)) }).end(json);
}

/** The paths this server answers; any other is counted as "other" (labels stay bounded). */
const knownPaths = new Set(['/healthz', '/readyz', '/v1/chat/completions', '/v1/models']);

export function createHandler(deps: ServerDeps): http.RequestListener {
  const duration = deps.metrics.histogram('http_server_duration_seconds', 'Requests answered, by method, path and status.', ['method', 'route', 'status']);
  // The request line's fields are fixed and never secret: the redaction of secret fields, which
  // pino runs on every value of a line (~170 µs a line), has nothing to find there.
  const requestLog = deps.log.child({}, { redact: { paths: [] } });
  return (req, res) => {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && requestIdPattern.test(incoming) ? incoming : newId('req');
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (deps.lifecycle.draining) res.setHeader('Connection', 'close');
    const overhead = new Overhead();
    handle(deps, req, res, overhead)
      .catch((err: unknown) => {
        const { status, body, retryAfterSeconds } = toErrorResponse(err, requestId);
        if (status >= 500 && !(err instanceof ApiError)) deps.log.error({ err: (err as Error).message, request_id: requestId }, 'request failed');
        if (res.headersSent) {
          res.destroy();
          return;
        }
        // An error's own headers (a 429's Retry-After) beside those the request set already (x-ratelimit-*).
        const headers = { ...(retryAfterSeconds ? { 'retry-after': String(retryAfterSeconds) } : {}), ...(err instanceof ApiError ? err.options.headers : {}) };
        sendJson(res, overhead, status, headers, JSON.stringify(body));
      })
      .finally(() => {
        const path = req.url?.split('?')[0] ?? '/';
        const seconds = (performance.now() - overhead.started) / 1000;
        duration.observe(
          {
            method: req.method === 'GET' || req.method === 'POST' ? req.method : 'other',
            route: knownPaths.has(path) ? path : 'other',
            status: res.statusCode,
          },
          seconds,
        );
        if (requestLog.isLevelEnabled('info')) {
          requestLog.info({ request_id: requestId, method: req.method, path, status: res.statusCode, ms: Math.round(seconds * 1000) }, 'request');
        }
      });
  };
}

async function handle(deps: ServerDeps, req: http.IncomingMessage, res: http.ServerResponse, overhead: Overhead): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz' && req.method === 'GET') {
    if (!deps.lifecycle.ready) sendJson(res, overhead, 503, {}, '{"status":"shutting_down"}');
    else sendJson(res, overhead, 200, {}, '{"status":"ok"}');
    return;
  }
  // Readiness: /healthz, and NATS taking the data plane's credentials (a refusal needs a fix, not a restart: /healthz stays the liveness).
  if (path === '/readyz' && req.method === 'GET') {
    if (!deps.lifecycle.ready) sendJson(res, overhead, 503, {}, '{"status":"shutting_down"}');
    else if (deps.nats?.refused) sendJson(res, overhead, 503, {}, '{"status":"nats_credentials_refused"}');
    else sendJson(res, overhead, 200, {}, '{"status":"ready"}');
    return;
  }
  if (path === '/v1/models') {
    if (req.method !== 'GET') throw wrongMethod('GET /v1/models lists the models.');
    const fullKey = bearerKey(req);
    const key = await deps.completions.authorize(fullKey, headersOn(res));
    sendJson(res, overhead, 200, {}, JSON.stringify(await deps.completions.models(key)));
    return;
  }
  if (path === '/v1/chat/completions') {
    if (req.method !== 'POST') throw wrongMethod('POST /v1/chat/completions creates a completion.');
    const fullKey = bearerKey(req);
    // Nothing that cannot be a key gets its body read (a key is checked for real in the key replica).
    if (!keyShape.test(fullKey)) throw catalogued(errorCatalogue.invalidApiKey, {}, 'front-door');
    const raw = await readBody(req, maxBodyBytes, tooLarge);
    if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) {
      throw catalogued(errorCatalogue.unsupportedMediaType, {}, 'front-door');
    }
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      throw catalogued(errorCatalogue.invalidJson, {}, 'front-door');
    }
    // The body's syntax first, as the gateway checks it on the REST surface; then the key and its
    // scope, before the fields (docs/api/front-door.md#order-of-checks).
    const key = await deps.completions.authorize(fullKey, headersOn(res));
    const conversation = req.headers['x-service-conversation-id'];
    const conversationId = typeof conversation === 'string' && conversation !== '' ? conversation : undefined;
    const request = parseChatRequest(json, raw.length);
    const unsupported = unsupportedParameter(request);
    if (unsupported) throw unsupported;
    await deps.completions.complete(key, request, conversationId, replyTo(res, deps.idleTimeoutMs, overhead));
    return;
  }
  throw catalogued(errorCatalogue.routeNotFound, { method: req.method, path }, {}, 'front-door');
}

/** Headers every answer to the request carries from now on, an error's included. */
function headersOn(res: http.ServerResponse): (headers: Record<string, string>) => void {
  return (headers) => {
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  };
}

/** The API key of the request (the data plane takes API keys only). */
function bearerKey(req: http.IncomingMessage): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!match) throw catalogued(errorCatalogue.unauthenticated, { headerSent: req.headers.authorization !== undefined }, {}, 'front-door');
  return match[1];
}

/**
 * The catalogue's method_not_allowed with a sentence of the path's own: each path here has one
 * method, and the sentence says what it does (the catalogue's sentence lists an `Allow`).
 */
const wrongMethod = (sentence: string) => new ApiError(errorCatalogue.methodNotAllowed.status, errorCatalogue.methodNotAllowed.code, sentence);

const tooLarge = () => catalogued(errorCatalogue.payloadTooLarge, { limitBytes: maxBodyBytes }, {}, 'front-door');

/**
 * The answer of one chat completion. `idleTimeoutMs` bounds how long a write waits for a client
 * that does not read: then the client is dropped, as if it had gone away (the signal aborts).
 */
export function replyTo(res: http.ServerResponse, idleTimeoutMs?: number, overhead = new Overhead()): Reply {
  const aborted = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) aborted.abort();
  });
  return {
    signal: aborted.signal,
    headers: headersOn(res),
    upstream: (work) => overhead.upstream(work),
    timing() {
      const now = performance.now();
      return { elapsedMs: now - overhead.started, overheadMs: Number(overhead.answered ?? overhead.msAt(now)) };
    },
    json(status, headers, body) {
      sendJson(res, overhead, status, headers, JSON.stringify(body));
    },
    startStream(headers) {
      writeHead(res, overhead, 200, { 'content-type': 'text/event-stream; charset=utf-8', connection: 'keep-alive', ...headers });
      res.flushHeaders();
    },
    async write(text) {
      if (res.writableEnded || res.destroyed) return;
      // A client that reads slowly slows the upstream read instead of filling this process's memory.
      if (!res.write(text))
        await new Promise<void>((resolve) => {
          // One that stops reading would hold the stream and its upstream call forever.
          const idle = idleTimeoutMs === undefined ? undefined : setTimeout(() => res.destroy(), idleTimeoutMs);
          const done = () => {
            clearTimeout(idle);
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
    },
    end() {
      if (!res.writableEnded) res.end();
    },
  };
}
