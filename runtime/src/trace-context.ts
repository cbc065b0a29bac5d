import type http from 'node:http';
import type * as OpenTelemetry from '@opentelemetry/api';

/**
 * What components need of tracing (docs/operations.md, "Traces"): carrying the trace context over
 * Connect calls and events, and a span around each RPC and each event handled. Until the tracing
 * SDK enables it (tracing.ts, loaded with `--import` when an OTEL_* exporter is configured) every
 * function here is a no-op and @opentelemetry/api is never loaded: tracing off costs one check.
 */

let otel: typeof OpenTelemetry | undefined;
let flushSpans: () => Promise<void> = async () => undefined;
let trustIncoming: (req: http.IncomingMessage) => boolean = () => true;

/** Called once by the tracing SDK when it has started. */
export function enableTraceContext(api: typeof OpenTelemetry, flush: () => Promise<void>): void {
  otel = api;
  flushSpans = flush;
}

export function tracingOn(): boolean {
  return otel !== undefined;
}

/** Headers a trace context is read from: fetch's `Headers`, NATS message headers. */
export interface TraceCarrier {
  get(name: string): string | null | undefined;
  keys(): Iterable<string>;
}

const carrierGetter: OpenTelemetry.TextMapGetter<TraceCarrier> = {
  get: (carrier, key) => carrier.get(key) || undefined,
  keys: (carrier) => [...carrier.keys()],
};

const carrierSetter: OpenTelemetry.TextMapSetter<Headers | Record<string, string>> = {
  set: (carrier, key, value) => {
    if (carrier instanceof Headers) carrier.set(key, value);
    else carrier[key] = value;
  },
};

/** Adds the active trace context (W3C `traceparent`, `tracestate`) to the headers of an outgoing call. */
export function injectTraceContext(headers: Headers | Record<string, string>): void {
  otel?.propagation.inject(otel.context.active(), headers, carrierSetter);
}

/** The active trace context as headers, for an event to carry (the outbox); undefined when none. */
export function traceContextHeaders(): Record<string, string> | undefined {
  if (!otel) return undefined;
  const headers: Record<string, string> = {};
  otel.propagation.inject(otel.context.active(), headers, carrierSetter);
  return Object.keys(headers).length > 0 ? headers : undefined;
}

export interface SpanStart {
  name: string;
  kind: 'server' | 'consumer';
  /** Where the caller's trace context is, when no span is active already (an HTTP/1.1 call has one). */
  carrier?: TraceCarrier;
  attributes: Record<string, string | number>;
}

/**
 * Runs `run` in a new span, a child of the active span or else of the context in `carrier`. A
 * failure marks the span as an error, with `errorCode(err)` as `error.type`.
 */
export function inSpan<T>(start: SpanStart, run: () => Promise<T>, errorCode?: (err: unknown) => string): Promise<T> {
  if (!otel) return run();
  const api = otel;
  const active = api.context.active();
  const parent = api.trace.getSpan(active) || !start.carrier ? active : api.propagation.extract(active, start.carrier, carrierGetter);
  const kind = start.kind === 'server' ? api.SpanKind.SERVER : api.SpanKind.CONSUMER;
  return api.trace.getTracer('switchboard').startActiveSpan(start.name, { kind, attributes: start.attributes }, parent, async (span) => {
    try {
      return await run();
    } catch (err) {
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      span.setAttribute('error.type', errorCode?.(err) ?? (err instanceof Error ? err.name : 'error'));
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Names the active HTTP server span after its route template (`POST /v1/keys`) once the route is
 * known. The template replaces the path too: a path value can be a capability (the sandbox
 * checkout's token), and it must not reach the collector.
 */
export function nameHttpRoute(method: string, route: string): void {
  const span = otel?.trace.getActiveSpan();
  if (!span) return;
  span.setAttributes({ 'http.route': route, 'url.path': route });
  span.updateName(`${method} ${route}`);
}

/** `trace_id` and `span_id` of the active span, for log lines; empty when none. */
export function activeTraceFields(): { trace_id?: string; span_id?: string } {
  const context = otel?.trace.getActiveSpan()?.spanContext();
  return context ? { trace_id: context.traceId, span_id: context.spanId } : {};
}

/**
 * Whether an incoming HTTP request's own trace context is continued (by default yes). A public
 * edge (the gateway) continues only those of the proxies it trusts: anyone else starts a new trace,
 * so a client can neither join another trace nor switch sampling off for its requests.
 */
export function trustIncomingTraceContext(trusted: (req: http.IncomingMessage) => boolean): void {
  trustIncoming = trusted;
}

export function incomingTraceContextTrusted(req: http.IncomingMessage): boolean {
  return trustIncoming(req);
}

/** Exports the spans still buffered, before the process exits: waits `timeoutMs` at most, never fails. */
export async function flushTraces(timeoutMs = 2000): Promise<void> {
  if (!otel) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([flushSpans().catch(() => undefined), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}
