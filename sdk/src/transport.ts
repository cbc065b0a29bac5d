import { APIConnectionError, APITimeoutError, parseRetryAfter } from './errors.js';

/** Options every call takes as its last argument (they override the client's). */
export interface RequestOptions {
  /** Milliseconds an attempt may wait for the answer's headers (default: the client's, 60 000). */
  timeout?: number;
  /** Retries after the first attempt (default: the client's, 2); 0 turns them off. */
  maxRetries?: number;
  /**
   * The `Idempotency-Key` of a POST (1..255 printable ASCII characters). By default each POST gets
   * a new random one, kept across its retries; pass your own to make a retry of your own (a later
   * run of a job, say) answer the first result (docs/conventions.md#idempotency).
   */
  idempotencyKey?: string;
  /** Aborts the call, including the wait between retries. */
  signal?: AbortSignal;
  /** The organization the call acts in (`X-Workspace-Id`), instead of the client's `workspaceId`. */
  workspaceId?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
}

/** How the client waits between attempts; the defaults suit production, tests inject their own clock. */
export interface BackoffOptions {
  /** The first backoff, before jitter (default 500 ms); it doubles at each retry. */
  initialDelayMs?: number;
  /** The longest backoff, before jitter (default 8 000 ms). */
  maxDelayMs?: number;
  /** A `Retry-After` longer than this is not waited for: the error is thrown at once (default 60 000 ms). */
  maxRetryAfterMs?: number;
  /** Waits `ms` milliseconds, rejecting when `signal` aborts (default: a timer). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
}

/** What the transport knows of one call. */
export interface CallSettings {
  timeout: number;
  maxRetries: number;
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Whether a POST gets an `Idempotency-Key` (every POST of the REST surface; not the front door's). */
  idempotent: boolean;
  /**
   * Whether a 503 of a POST without an `Idempotency-Key` may be retried: the front door answers its
   * 503s before anything goes upstream (docs/api/front-door.md#errors).
   */
  retry503WithoutKey?: boolean;
}

export const defaultTimeoutMs = 60_000;
export const defaultMaxRetries = 2;

/** Sends a request with its retries. */
export interface Transport {
  send(request: Request, call: CallSettings): Promise<Response>;
}

/**
 * Sends requests with retries: 429 and 503 answers and connection failures (timeouts included)
 * are tried again, up to `maxRetries` times, after an exponential backoff with jitter, or after
 * the answer's `Retry-After` (docs/conventions.md#errors: it comes with every 429 and with the
 * 503s where waiting helps). A POST gets an `Idempotency-Key`, the same on each of its attempts,
 * so a retry whose first attempt did run answers the first result instead of running again
 * (docs/conventions.md#idempotency); a POST without one (the front door) is retried only on the
 * answers that say nothing ran.
 */
export function createTransport(deps: {
  fetch: (request: Request) => Promise<Response>;
  backoff?: BackoffOptions;
  /** Called before each attempt: sets its credentials (renewed ones after a refresh). */
  authorize: (request: Request) => void;
  /** After a 401, whether the request may be sent once more with renewed credentials. */
  renewAfter?: (request: Request, response: Response) => Promise<boolean>;
}): Transport {
  const initialDelayMs = deps.backoff?.initialDelayMs ?? 500;
  const maxDelayMs = deps.backoff?.maxDelayMs ?? 8_000;
  const maxRetryAfterMs = deps.backoff?.maxRetryAfterMs ?? 60_000;
  const sleep = deps.backoff?.sleep ?? defaultSleep;
  const random = deps.backoff?.random ?? Math.random;

  /** The backoff before retry number `retry` (0-based): half of it fixed, half random, so clients that failed together spread out. */
  const backoff = (retry: number) => {
    const ceiling = Math.min(maxDelayMs, initialDelayMs * 2 ** retry);
    return ceiling / 2 + (ceiling / 2) * random();
  };

  return {
    async send(original, call) {
      const method = original.method.toUpperCase();
      const headers = new Headers(original.headers);
      let idempotencyKey = headers.get('idempotency-key') ?? call.idempotencyKey;
      if (method === 'POST' && call.idempotent) idempotencyKey ??= randomKey();
      if (idempotencyKey !== undefined) headers.set('idempotency-key', idempotencyKey);
      // The body is read once and sent again from memory at each attempt.
      const body = original.body === null ? undefined : await original.arrayBuffer();
      const retriesConnection = method !== 'POST' || idempotencyKey !== undefined;
      const retriesStatus = (status: number) =>
        status === 429 || (status === 503 && (method !== 'POST' || idempotencyKey !== undefined || call.retry503WithoutKey === true));

      let renewed = false;
      for (let attempt = 0; ; attempt++) {
        const request = new Request(original.url, { method, headers, body, redirect: original.redirect });
        deps.authorize(request);
        const timeout = new AbortController();
        const timer = setTimeout(() => timeout.abort(), call.timeout);
        const signal = call.signal ? AbortSignal.any([call.signal, timeout.signal]) : timeout.signal;
        let response: Response;
        try {
          response = await deps.fetch(new Request(request, { signal }));
        } catch (err) {
          // The caller's own abort ends the call as it is; anything else is the connection's failure.
          if (call.signal?.aborted) throw call.signal.reason ?? err;
          const failure = timeout.signal.aborted ? new APITimeoutError(call.timeout) : new APIConnectionError({ cause: err });
          if (!retriesConnection || attempt >= call.maxRetries) throw failure;
          await sleep(backoff(attempt), call.signal);
          continue;
        } finally {
          // The timeout covers the wait for the headers; a body (a stream) is read at the caller's pace.
          clearTimeout(timer);
        }
        if (response.status === 401 && !renewed && deps.renewAfter && (await deps.renewAfter(request, response))) {
          // The renewed credentials are sent at once; this attempt does not count as a retry.
          await response.body?.cancel();
          renewed = true;
          attempt--;
          continue;
        }
        if (!retriesStatus(response.status) || attempt >= call.maxRetries) return response;
        const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
        const delay = retryAfter === null ? backoff(attempt) : retryAfter * 1000;
        // A long wait (an account locked for 15 minutes) is the caller's decision, not the SDK's.
        if (delay > maxRetryAfterMs) return response;
        await response.body?.cancel();
        await sleep(delay, call.signal);
      }
    },
  };
}

/**
 * A new idempotency key: a random UUID (v4). Made from getRandomValues, which browsers offer on
 * plain-HTTP pages too (randomUUID needs a secure context).
 */
export function randomKey(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Waits `ms` milliseconds; rejects with the signal's reason when it aborts first. */
function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
