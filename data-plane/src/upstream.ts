import type { CatalogModel, CatalogRegion, Region } from '@switchboard/runtime/model-catalog';
import { supportedParameters } from './chat-request.js';
import { demoUpstream } from './demo-upstream.js';

/**
 * One call to an OpenAI-compatible upstream (docs/api/front-door.md#a-request-step-by-step): the request's parameters of the
 * allow-list with the catalog's model id, `Authorization: Bearer <value of the region's api_key_env>`, and for streams
 * `stream_options.include_usage` forced on, so usage can be billed. The caller's signal aborts
 * it (a client that went away); `headersTimeoutMs` bounds the wait for the first byte.
 */

export interface UpstreamSettings {
  /** How long the upstream may take to answer the request (its headers). */
  headersTimeoutMs: number;
  /** The value of each region's `api_key_env` variable, read at start (config.ts). */
  apiKeys: Record<string, string | undefined>;
  /** The regions the demo upstream answers in this process (DEMO_UPSTREAM, config.ts): the same request, no network. */
  demoRegions?: ReadonlySet<Region>;
}

/** A failure before the upstream's first byte: another candidate may be tried. */
export class UpstreamUnavailable extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** The upstream refused the request as malformed (400, 422): no other candidate would take it. */
export class UpstreamRejected extends Error {}

/** The message of an OpenAI-style error body, bounded. */
function upstreamMessage(text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? message.slice(0, 500) : '';
  } catch {
    return '';
  }
}

export async function callUpstream(
  target: { model: CatalogModel; region: CatalogRegion },
  body: Record<string, unknown>,
  options: UpstreamSettings & { signal: AbortSignal },
): Promise<Response> {
  const stream = body.stream === true;
  // Only what the price list can bill goes upstream, whatever the caller checked before.
  const upstreamBody: Record<string, unknown> = {};
  for (const name in body) if (supportedParameters.has(name)) upstreamBody[name] = body[name];
  upstreamBody.model = target.model.id;
  if (stream) upstreamBody.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
  const apiKey = options.apiKeys[target.region.apiKeyEnv];
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  // The fetch's signal also governs its body: the timeout is stopped once a stream's headers
  // arrived (the idle timeout of readEvents bounds it from there), so that a stream may last longer
  // than UPSTREAM_TIMEOUT. A JSON answer stays bounded by it as a whole.
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), options.headersTimeoutMs);
  timer.unref();
  let response: Response;
  try {
    response = options.demoRegions?.has(target.model.region)
      ? demoUpstream(target, upstreamBody)
      : await fetch(`${target.region.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
          method: 'POST',
          headers,
          body: JSON.stringify(upstreamBody),
          signal: AbortSignal.any([options.signal, timeout.signal]),
          redirect: 'manual',
        });
  } catch (err) {
    clearTimeout(timer);
    if (options.signal.aborted) throw err;
    throw new UpstreamUnavailable(
      timeout.signal.aborted ? 'the upstream did not answer in time' : `the upstream could not be reached (${(err as Error).message})`,
    );
  }
  if (stream) clearTimeout(timer);
  if (response.status < 200 || response.status >= 300) {
    // The request itself was refused (a parameter the model does not take): the same request
    // would fail on any candidate, so it is the client's 400 with the upstream's reason. The
    // timer still bounds the read of that reason.
    if (response.status === 400 || response.status === 422) {
      const reason = await response.text().then(upstreamMessage, () => '');
      clearTimeout(timer);
      throw new UpstreamRejected(reason || `the upstream refused the request (${response.status})`);
    }
    clearTimeout(timer);
    await response.body?.cancel().catch(() => undefined);
    throw new UpstreamUnavailable(`the upstream answered ${response.status}`, response.status);
  }
  return response;
}

/** The longest event held while it is incomplete: a stream's events are small chunks. */
const maxEventChars = 1024 * 1024;

/**
 * Server-sent events as they arrive: each complete event's raw text (to pass on as is) and its
 * data. A partial event waits for the rest of it; nothing else is held back. `signal` ends the
 * events at once, even while the upstream is silent, with the signal's reason as the error: a
 * client gone, a stream past STREAM_MAX_DURATION, a shutdown. An error, not an end: a caller that
 * missed it would take a cut stream for a complete one (the caller tells which signal it was and
 * bills what was produced).
 */
export async function* readEvents(body: ReadableStream<Uint8Array>, idleTimeoutMs: number, signal: AbortSignal): AsyncGenerator<{ raw: string; data: string }> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  let stop = () => {};
  const stopped = new Promise<never>((_, reject) => {
    stop = () => reject(signal.reason);
  });
  // Handled by the race it joins; this keeps an abort between two reads from counting as unhandled.
  stopped.catch(() => undefined);
  if (signal.aborted) stop();
  else signal.addEventListener('abort', stop, { once: true });
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const idle = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the upstream stream stalled')), idleTimeoutMs);
      });
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await Promise.race([reader.read(), idle, stopped]);
      } catch (err) {
        // The same signal usually aborts the upstream's fetch too, which fails its body's read first.
        throw signal.aborted ? signal.reason : err;
      } finally {
        clearTimeout(timer);
      }
      if (signal.aborted) throw signal.reason;
      if (chunk.done) break;
      // Normalized on the whole pending text: a CRLF split between two chunks ("…\r" then "\n…") counts too.
      pending = (pending + decoder.decode(chunk.value, { stream: true })).replaceAll('\r\n', '\n');
      if (pending.length > maxEventChars) throw new Error(`an upstream event is longer than ${maxEventChars} characters`);
      let end = pending.indexOf('\n\n');
      while (end >= 0) {
        const raw = pending.slice(0, end + 2);
        pending = pending.slice(end + 2);
        const data = raw
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trimStart())
          .join('\n');
        yield { raw, data };
        end = pending.indexOf('\n\n');
      }
    }
  } finally {
    signal.removeEventListener('abort', stop);
    reader.cancel().catch(() => undefined);
  }
}
