import { table } from '@switchboard/testkit/text-table';
import type { CpuUse } from '../measure/proc.js';
import { fmt } from '../report.js';
import type { CredentialComparison, GatewaySummary } from './gateway-account.js';
import type { RpcComparison, RpcSummary } from './rpc-comparison.js';
import { concurrency, halfSeconds, maxP99Ms, unloadedSeconds } from './settings.js';

const cpuCell = (cpu: CpuUse, name: string) => fmt(cpu.processes[name]);

const gatewayRow = (credential: string, s: GatewaySummary) => [
  credential,
  fmt(s.rps),
  fmt(s.latencyMs.p50, 1),
  fmt(s.latencyMs.p99, 1),
  fmt(s.non2xx),
  fmt(s.errors),
  cpuCell(s.cpu, 'gateway'),
  cpuCell(s.cpu, 'identity'),
  cpuCell(s.cpu, 'keys'),
  fmt(s.cpu.hostBusyPercent),
];

function formatRpcTable(comparisons: RpcComparison[]): string {
  const rows: string[][] = [];
  const row = (transport: string, rpc: string, s: RpcSummary, ratio?: number) => [
    transport,
    rpc,
    fmt(s.callsPerSecond),
    fmt(s.latencyMs.p50, 2),
    fmt(s.latencyMs.p99, 2),
    fmt(s.latencyMs.max, 1),
    fmt(s.failed + s.errors),
    cpuCell(s.cpu, 'keys'),
    fmt(s.keysCpuMicrosPerCall),
    cpuCell(s.cpu, 'bench (load generator)'),
    fmt(s.cpu.hostBusyPercent),
    ratio === undefined ? '-' : ratio.toFixed(2),
  ];
  for (const c of comparisons) {
    rows.push(row(c.transport, 'Health/Check (liveness)', c.health));
    rows.push(row(c.transport, 'AuthorizeKey', c.authorize, c.ratio));
    rows.push(row(c.transport, 'AuthorizeKey, 1 in flight', c.authorizeAlone));
  }
  return table(
    ['transport', 'RPC', 'calls/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', 'keys CPU%', 'keys µs/call', 'bench CPU%', 'host%', '÷ Health'],
    rows,
    2,
  );
}

/** The tables of bench:keys under `header`: the RPCs per transport, then the gateway per credential. */
export function keysPrintout(header: string[], comparisons: RpcComparison[], gateway: CredentialComparison): string[] {
  const out = [...header, ''];
  out.push(
    `AuthorizeKey (no estimate: in memory) vs Health/Check {service: "liveness"} on the keys service, from the bench process, ${concurrency} calls in flight over one h2c connection;`,
  );
  out.push(`${halfSeconds * 2} s measured per RPC per transport, as Health, AuthorizeKey, AuthorizeKey, Health, ${halfSeconds} s each`);
  out.push(formatRpcTable(comparisons));
  for (const c of comparisons) out.push(`    ${c.transport}: ${c.path}`);
  out.push(
    `    At ${concurrency} in flight the mean latency is ${concurrency} ÷ calls/s (Little's law): a p99 under ${maxP99Ms} ms there needs more than ${Math.round((concurrency * 1000) / maxP99Ms)} calls/s;`,
  );
  out.push(`    the "1 in flight" rows (${unloadedSeconds} s, after the load) are the call's own latency, without queueing.`);
  out.push('');
  out.push(`GET /v1/account through the gateway, ${concurrency} connections (autocannon): JWT, key, key, JWT, ${halfSeconds} s each; p50/p99: the worse half`);
  out.push(
    table(
      ['credential', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'gateway CPU%', 'identity CPU%', 'keys CPU%', 'host%'],
      [gatewayRow('Bearer <access token> (JWT)', gateway.jwt), gatewayRow('Bearer <API key> (sb_…)', gateway.key)],
    ),
  );
  out.push(`  API key req/s ÷ JWT req/s: ${gateway.ratio.toFixed(2)}`);
  return out;
}
