/**
 * Gateway hop benchmark: what the gateway's forwarding of the data plane's routes costs
 * (gateway/src/data-plane-proxy.ts), against a stand-in data plane that answers at once
 * (gateway-hop/echo-child.ts), so that nothing but the hop is measured.
 *
 *   npm run bench:gateway-hop   (BENCH_ROUNDS, default 4; BENCH_SECONDS, default 2: seconds per
 *                                target and round at 1 in flight; BENCH_LOAD_SECONDS, default 5:
 *                                the CPU runs at 8 in flight)
 *
 * 1. Starts the echo in a child process and the real gateway (gateway/dist/src/main.js, at
 *    LOG_LEVEL info as in production; no service or NATS behind it, which the data plane's routes
 *    do not need) with DATA_PLANE_URL pointing at the echo.
 * 2. Latency at 1 in flight over a keep-alive agent, direct and through the gateway interleaved
 *    (direct, gateway, gateway, direct in each round): POST /v1/chat/completions with a 1 KiB
 *    body, and GET /v1/models. Added = through the gateway − direct, at p50 and p99.
 * 3. CPU per request (/proc/<pid>/stat) of the gateway and of the echo at 8 in flight, through
 *    the gateway and direct (the echo's figure is what one plain Node HTTP exchange costs).
 * 4. A stream's first byte, direct and through the gateway, when the rest follows 50 ms later:
 *    a hop that held the stream back would add those 50 ms.
 *
 * Targets, reported PASS/FAIL (never a crash): the hop well under 0.1 ms, as added p50 of a
 * completion and as the gateway's CPU per forwarded request, and a stream's first byte through
 * the gateway within 5 ms of direct (nothing held back). The echo's CPU per request is printed
 * beside the gateway's: a hop is one server exchange and one client exchange, each about what the
 * echo's one costs, which is the floor of a node:http hop on the host. Exits non-zero only when a
 * request failed. Results: printed, and written to bench/results/gateway-hop-<time>.json.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '@switchboard/runtime/infra';
import { eventually } from '@switchboard/runtime/testing';
import { send } from './data-plane/requests.js';
import { requestTimeoutMs } from './data-plane/settings.js';
import { latencySeconds, loadInFlight, loadSeconds, rounds, streamGapMs, streams } from './gateway-hop/settings.js';
import { latencyOf, round } from './measure/latency.js';
import { closedLoop } from './measure/loop.js';
import { cpuMeter, cpuMicrosPer } from './measure/proc.js';
import type { BenchSession } from './measure/session.js';
import { inSession } from './measure/session.js';
import { benchHeader, check, fmt, machineFacts, runBench } from './report.js';

/** A child process of the bench, stopped at the end of the session. */
function spawnChild(session: BenchSession, name: string, args: string[], env?: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, args, { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  session.defer(name, async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  return child;
}

async function startEcho(session: BenchSession): Promise<{ baseUrl: string; pid?: number }> {
  const child = spawnChild(session, 'echo', [fileURLToPath(new URL('./gateway-hop/echo-child.js', import.meta.url))]);
  const [line] = await Promise.race([
    createInterface({ input: child.stdout! })
      [Symbol.asyncIterator]()
      .next()
      .then((next) => [next.value as string]),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the echo did not start')), 15_000)),
  ]);
  return { baseUrl: (JSON.parse(line) as { baseUrl: string }).baseUrl, pid: child.pid };
}

async function startGateway(session: BenchSession, dataPlaneUrl: string): Promise<{ baseUrl: string; pid?: number }> {
  const port = await freePort();
  // Nothing answers here: the services and NATS are not on the data plane's routes.
  const nowhere = `127.0.0.1:${await freePort()}`;
  const child = spawnChild(session, 'gateway', [fileURLToPath(new URL('../../gateway/dist/src/main.js', import.meta.url))], {
    PATH: process.env.PATH ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    LOG_LEVEL: 'info',
    DATA_PLANE_URL: dataPlaneUrl,
    SWITCHBOARD_MESH_SECRET: randomBytes(32).toString('base64url'),
    SWITCHBOARD_IDEMPOTENCY_SECRET: randomBytes(32).toString('base64url'),
    NATS_URL: `nats://${nowhere}`,
    ...Object.fromEntries(['IDENTITY', 'KEYS', 'BILLING', 'CONVERSATIONS', 'WEBHOOKS'].map((name) => [`${name}_URL`, `http://${nowhere}`])),
  });
  // Its request log goes where a container's would: read and dropped.
  child.stdout!.resume();
  const baseUrl = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(`${baseUrl}/healthz`)).ok, 'the gateway to listen', 30_000, 100);
  return { baseUrl, pid: child.pid };
}

/** One request: a POST when it has a body. */
interface Target {
  url: URL;
  body?: string;
}

const headers = { authorization: `Bearer sb_${'a'.repeat(49)}`, accept: 'application/json' };

/** `inFlight` loops of `target` for `seconds`: the latencies of the 200s, the failures. */
async function loop(agent: http.Agent, target: Target, inFlight: number, seconds: number) {
  const latencies: number[] = [];
  let failures = 0;
  const elapsed = await closedLoop(inFlight, { maxCalls: 10_000_000, seconds }, async () => {
    const started = performance.now();
    const answer = await send(agent, target.url, headers, target.body).catch(() => undefined);
    if (answer?.status === 200) latencies.push(performance.now() - started);
    else failures += 1;
  });
  return { latencies, failures, rps: latencies.length / elapsed };
}

/** The time to a stream's first byte, and to its end. */
function firstByte(agent: http.Agent, url: URL): Promise<{ firstMs: number; endMs: number } | undefined> {
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true });
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(
      { agent, hostname: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...headers, 'content-type': 'application/json' } },
      (res) => {
        let firstMs = 0;
        res.on('data', () => {
          firstMs ||= performance.now() - started;
        });
        res.on('end', () => resolve({ firstMs, endMs: performance.now() - started }));
        res.on('error', reject);
      },
    );
    req.setTimeout(requestTimeoutMs, () => req.destroy(new Error(`no answer within ${requestTimeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

runBench(() =>
  inSession('gateway-hop', async (session) => {
    const echo = await startEcho(session);
    const gateway = await startGateway(session, echo.baseUrl);
    const agent = new http.Agent({ keepAlive: true, maxSockets: loadInFlight });
    session.defer('agent', async () => agent.destroy());
    const completionBody = JSON.stringify({ model: 'service/fast', messages: [{ role: 'user', content: 'x'.repeat(960) }], max_tokens: 16 });
    const via = (base: string, path: string, body?: string): Target => ({ url: new URL(`${base}${path}`), body });
    const kinds = [
      { name: 'POST /v1/chat/completions (1 KiB body)', path: '/v1/chat/completions', body: completionBody },
      { name: 'GET /v1/models', path: '/v1/models' },
    ];
    const errors: string[] = [];

    session.progress('warming up');
    for (const kind of kinds) for (const base of [echo.baseUrl, gateway.baseUrl]) await loop(agent, via(base, kind.path, kind.body), loadInFlight, 1);

    const latency: Record<string, { direct: number[]; gateway: number[] }> = {};
    for (const kind of kinds) {
      session.progress(`${kind.name}: 1 in flight, ${rounds} rounds of ${latencySeconds} s per target`);
      const runs = { direct: [] as number[], gateway: [] as number[] };
      for (let r = 0; r < rounds; r++) {
        for (const through of ['direct', 'gateway', 'gateway', 'direct'] as const) {
          const result = await loop(agent, via(through === 'direct' ? echo.baseUrl : gateway.baseUrl, kind.path, kind.body), 1, latencySeconds / 2);
          if (result.failures) errors.push(`${kind.name} ${through}: ${result.failures} requests failed`);
          runs[through].push(...result.latencies);
        }
      }
      latency[kind.name] = runs;
    }

    session.progress(`CPU per request at ${loadInFlight} in flight, ${loadSeconds} s each`);
    const cpu: Record<string, { rps: number; gatewayUs?: number; echoUs?: number }> = {};
    for (const through of ['direct', 'gateway'] as const) {
      const stop = cpuMeter({ gateway: [gateway.pid], echo: [echo.pid] });
      const result = await loop(agent, via(through === 'direct' ? echo.baseUrl : gateway.baseUrl, kinds[0].path, kinds[0].body), loadInFlight, loadSeconds);
      const use = stop();
      if (result.failures) errors.push(`load ${through}: ${result.failures} requests failed`);
      cpu[through] = {
        rps: Math.round(result.rps),
        gatewayUs: cpuMicrosPer(use.processes.gateway, result.rps),
        echoUs: cpuMicrosPer(use.processes.echo, result.rps),
      };
    }

    session.progress(`${streams} streams per target, first byte`);
    const streamRuns = { direct: [] as number[], gateway: [] as number[], gatewayEnd: [] as number[] };
    const streamFailures: string[] = [];
    const timed = (base: string) =>
      firstByte(agent, new URL(`${base}/v1/chat/completions`)).catch((err: unknown) => {
        streamFailures.push((err as Error).message);
        return undefined;
      });
    for (let i = 0; i < streams; i++) {
      const direct = await timed(echo.baseUrl);
      const through = await timed(gateway.baseUrl);
      if (!direct || !through) continue;
      streamRuns.direct.push(direct.firstMs);
      streamRuns.gateway.push(through.firstMs);
      streamRuns.gatewayEnd.push(through.endMs);
    }
    if (streamFailures.length) errors.push(`streams: ${streamFailures.length} failed, the first: ${streamFailures[0]}`);

    const machine = machineFacts(session.loadAverageAtStart);
    const lines = [...benchHeader('gateway-hop', session.at, machine, 'the gateway, the echo and the load generator'), '', 'Latency at 1 in flight (ms)'];
    const added: Record<string, { p50: number; p99: number }> = {};
    for (const [name, runs] of Object.entries(latency)) {
      const direct = latencyOf(runs.direct);
      const through = latencyOf(runs.gateway);
      added[name] = { p50: round(through.p50 - direct.p50, 3), p99: round(through.p99 - direct.p99, 3) };
      lines.push(
        `  ${name}`,
        `    direct       p50 ${fmt(direct.p50, 3)}  p99 ${fmt(direct.p99, 3)}  (${runs.direct.length} requests)`,
        `    via gateway  p50 ${fmt(through.p50, 3)}  p99 ${fmt(through.p99, 3)}  (${runs.gateway.length} requests)`,
        `    added        p50 ${fmt(added[name].p50, 3)}  p99 ${fmt(added[name].p99, 3)}`,
      );
    }
    lines.push('', `CPU per request at ${loadInFlight} in flight (POST /v1/chat/completions), µs`);
    for (const [through, figures] of Object.entries(cpu))
      lines.push(`  ${through.padEnd(8)} ${String(figures.rps).padStart(6)} req/s   gateway ${fmt(figures.gatewayUs)}   echo ${fmt(figures.echoUs)}`);
    const streamDirect = latencyOf(streamRuns.direct);
    const streamGateway = latencyOf(streamRuns.gateway);
    const streamEnd = latencyOf(streamRuns.gatewayEnd);
    lines.push(
      '',
      `A stream's first byte, the rest ${streamGapMs} ms later (ms)`,
      `  direct       p50 ${fmt(streamDirect.p50, 3)}  p99 ${fmt(streamDirect.p99, 3)}`,
      `  via gateway  p50 ${fmt(streamGateway.p50, 3)}  p99 ${fmt(streamGateway.p99, 3)}  (its end: p50 ${fmt(streamEnd.p50, 3)})`,
    );
    const completion = added[kinds[0].name];
    const targets = [
      check('added p50, POST /v1/chat/completions', completion.p50, '<', 0.1, 'ms'),
      check('gateway CPU per forwarded request', cpu.gateway.gatewayUs ?? Number.POSITIVE_INFINITY, '<', 100, 'µs'),
      check("a stream's first byte via the gateway − direct, p50", round(streamGateway.p50 - streamDirect.p50, 3), '<', 5, 'ms'),
    ];
    const report = { at: session.at, machine, latency: added, cpu, streams: { streamDirect, streamGateway, streamEnd }, targets, totalSeconds: 0 };
    return session.finish({ lines, targets, errors, report });
  }),
);
