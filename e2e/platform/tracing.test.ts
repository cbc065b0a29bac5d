import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { eventually } from '@switchboard/runtime/testing';
import { meshSuiteOfFile, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { OtlpReceiver, type ReceivedSpan, spanKind } from '@switchboard/testkit/otlp-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Traces (docs/operations.md, "Traces"): with an OTLP endpoint set, one REST request is one trace
 * through the gateway, the service it calls, that service's Postgres statements, and the consumer
 * of the event it wrote, whose context travelled through the outbox and NATS.
 */

const receiver = new OtlpReceiver();
// Registered before the mesh's hooks, so it runs once the mesh has stopped (after-hooks run in reverse).
afterAll(async () => {
  await receiver.stop();
});
const suite = meshSuiteOfFile(async () => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: await receiver.start(),
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '100',
  // Loopback's first address is the proxy in front of the gateway; 127.0.0.2 is a client.
  GATEWAY_TRUSTED_PROXIES: '127.0.0.1',
}));
let user: SignedUp;

beforeAll(async () => {
  user = await signUp(suite.call);
});

const gatewaySpanOf = (requestId: string) =>
  eventually(
    () => receiver.spans.find((span) => span.service === 'gateway' && span.kind === spanKind.server && span.attributes['switchboard.request_id'] === requestId),
    `the gateway's span of ${requestId}`,
  );

/** A request straight from `localAddress`, not through the proxy the gateway trusts. */
function requestFrom(localAddress: string, pathname: string, headers: Record<string, string>): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${suite.mesh.gatewayUrl}${pathname}`, { localAddress, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A W3C traceparent of a new trace, sampled. */
const traceparentOf = (traceId: string) => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

describe('traces', () => {
  it('follow one request through the gateway, the keys service, Postgres and the consumer of its event', async () => {
    const created = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'traced' } });
    expect(created.status, created.text).toBe(201);
    const requestId = created.headers.get('x-request-id')!;

    const gateway = await gatewaySpanOf(requestId);
    expect(gateway.name).toBe('POST /v1/keys');
    // The request id stays the key of the log lines, which name the trace too.
    const logLine = await eventually(
      () =>
        suite.mesh
          .output('gateway')
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Record<string, unknown>)
          .find((line) => line.msg === 'request' && line.request_id === requestId),
      'the request log line',
    );
    expect(logLine).toMatchObject({ trace_id: gateway.traceId, span_id: gateway.spanId });
    const trace = (predicate: (span: ReceivedSpan) => boolean, what: string) =>
      eventually(() => receiver.inTrace(gateway.traceId).find(predicate), `${what} in trace ${gateway.traceId}`);

    const rpc = await trace((span) => span.service === 'keys' && span.kind === spanKind.server, 'the keys RPC');
    expect(rpc).toMatchObject({ name: 'switchboard.keys.v1.KeyService/CreateKey', parentSpanId: gateway.spanId });
    expect(rpc.attributes).toMatchObject({ 'rpc.system': 'connect_rpc', 'switchboard.request_id': requestId });

    const insert = await trace(
      (span) =>
        span.service === 'keys' &&
        span.attributes['db.system.name'] === 'postgresql' &&
        String(span.attributes['db.query.text']).startsWith('insert into "api_keys"'),
      'the INSERT of the key',
    );
    expect(insert).toMatchObject({ kind: spanKind.client, parentSpanId: rpc.spanId });

    // key.created went through the outbox and NATS: its consumer continues the request's trace.
    const consumer = await trace((span) => span.service === 'webhooks' && span.kind === spanKind.consumer, 'the consumer of key.created');
    expect(consumer).toMatchObject({ name: 'process key.created', parentSpanId: rpc.spanId });
    expect(consumer.attributes).toMatchObject({ 'messaging.system': 'nats', 'switchboard.request_id': requestId });
    await trace((span) => span.service === 'webhooks' && span.parentSpanId === consumer.spanId, "the consumer's statements");
  });

  it('keeps the values of a path, a capability here, out of every span', async () => {
    const token = `chk_${randomBytes(16).toString('hex')}`;
    const page = await suite.call('GET', `/v1/billing/sandbox/checkout/${token}`);
    expect(page.status, page.text).toBe(404);

    const gateway = await gatewaySpanOf(page.headers.get('x-request-id')!);
    expect(gateway.name).toBe('GET /v1/billing/sandbox/checkout/{token}');
    expect(gateway.attributes['url.path']).toBe('/v1/billing/sandbox/checkout/{token}');
    // The lookup by token, a bound value of its statement.
    await eventually(
      () => receiver.inTrace(gateway.traceId).find((span) => span.service === 'billing' && String(span.attributes['db.query.text'] ?? '').includes('$1')),
      "billing's lookup of the token",
    );
    expect(JSON.stringify(receiver.inTrace(gateway.traceId))).not.toContain(token);
  });

  it("continues a trusted proxy's trace context, and never a client's own", async () => {
    const proxied = randomBytes(16).toString('hex');
    const throughProxy = await requestFrom('127.0.0.1', '/v1/keys', { authorization: `Bearer ${user.token}`, traceparent: traceparentOf(proxied) });
    expect(throughProxy.statusCode).toBe(200);
    expect((await gatewaySpanOf(String(throughProxy.headers['x-request-id']))).traceId).toBe(proxied);

    const chosenByClient = randomBytes(16).toString('hex');
    const direct = await requestFrom('127.0.0.2', '/v1/keys', { authorization: `Bearer ${user.token}`, traceparent: traceparentOf(chosenByClient) });
    expect(direct.statusCode).toBe(200);
    const span = await gatewaySpanOf(String(direct.headers['x-request-id']));
    expect(span.traceId).not.toBe(chosenByClient);
    expect(span.parentSpanId).toBe('');
    expect(receiver.inTrace(chosenByClient)).toEqual([]);
  });
});
