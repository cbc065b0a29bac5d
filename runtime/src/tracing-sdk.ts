import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';
import * as api from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { enableTraceContext, incomingTraceContextTrusted } from './trace-context.js';

/** Probes and scrapes: never a span. */
const untracedPaths = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * ESM imports of node:http reach the instrumentation only through import-in-the-middle's loader
 * hook (require hooks see CommonJS alone). The hook is the one @opentelemetry/instrumentation
 * depends on, and it wraps only the modules an instrumentation asks for.
 */
function registerImportHook(): { waitForAllMessagesAcknowledged(): Promise<void> } {
  const ownRequire = createRequire(import.meta.url);
  const instrumentationRequire = createRequire(
    createRequire(ownRequire.resolve('@opentelemetry/instrumentation-http')).resolve('@opentelemetry/instrumentation/package.json'),
  );
  const { createAddHookMessageChannel } = instrumentationRequire('import-in-the-middle') as {
    createAddHookMessageChannel(): { registerOptions: object; waitForAllMessagesAcknowledged(): Promise<void> };
  };
  const channel = createAddHookMessageChannel();
  register(pathToFileURL(instrumentationRequire.resolve('import-in-the-middle/hook.mjs')), channel.registerOptions);
  return channel;
}

/**
 * Starts the OpenTelemetry SDK for traces: exporter, sampler, propagators and resource from the
 * standard OTEL_* variables; HTTP servers and clients, fetch and pg instrumented; Connect calls and
 * events carry the context themselves (trace-context.ts).
 */
export async function startTracing(component: string): Promise<void> {
  const hook = registerImportHook();
  const namedByEnvironment = Boolean(process.env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name\s*=/.test(process.env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    serviceName: namedByEnvironment ? undefined : component,
    // Traces only: metrics are Prometheus's (/metrics), logs go to stdout.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => untracedPaths.has((req.url ?? '').split('?')[0]),
        // Called before the context is read from the headers: an untrusted caller's is dropped.
        startIncomingSpanHook: (req) => {
          if (!incomingTraceContextTrusted(req)) for (const field of api.propagation.fields()) delete req.headers[field];
          return {};
        },
        applyCustomAttributesOnSpan: (span, _request, response) => {
          const requestId = 'getHeader' in response ? response.getHeader('x-request-id') : undefined;
          if (typeof requestId === 'string') span.setAttribute('switchboard.request_id', requestId);
        },
        requireParentforOutgoingSpans: true,
      }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
      // Statements outside a request or an event (the outbox relay's polls, pruning) are not traced.
      new PgInstrumentation({ requireParentSpan: true }),
    ],
  });
  sdk.start();
  await hook.waitForAllMessagesAcknowledged();
  enableTraceContext(api, () => sdk.shutdown());
}
