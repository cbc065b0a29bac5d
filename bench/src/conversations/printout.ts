import { table } from '@switchboard/testkit/text-table';
import { insertsLabel, postgresServerLine } from '../measure/inserts.js';
import { benchHeader, fmt } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { LoadSummary, Loads } from './loads.js';
import type { ConversationsReport } from './results.js';
import { content, conversations, fillConcurrency, listLimit, listMessages } from './settings.js';

const loadRow = (name: string, s: LoadSummary, ratio: number | undefined) => [
  name,
  fmt(s.connections),
  fmt(s.rps),
  fmt(s.latencyMs.p50, 1),
  fmt(s.latencyMs.p99, 1),
  fmt(s.latencyMs.max, 1),
  fmt(s.non2xx + s.errors + s.timeouts),
  ratio === undefined ? '-' : ratio.toFixed(2),
];

/** What bench:conversations prints above its targets. */
export function conversationsPrintout(report: ConversationsReport, loads: Loads): string[] {
  const { one, many, list, perConversation } = loads;
  const { meshStartSeconds, postgresInserts: inserts } = report;
  const { nats: natsSetup, listResponseBytes: listBytes } = report.settings;
  const { fill } = report;
  const fillSeconds = fill.seconds;
  const ratioOne = report.append.oneConversation.ratioToInserts;
  const ratioMany = report.append.manyConversations.ratioToInserts;
  const out = benchHeader('conversations', report.at, report.machine, 'the load generator is this process');
  out.push(
    `  mesh ready in ${meshStartSeconds} s; NATS: ${natsSetup}; one user; the listed conversation filled with ${listMessages} messages in ${fillSeconds} s (${fillConcurrency} at a time)`,
  );
  out.push('');
  out.push(
    `Through the gateway (autocannon), ${durationSeconds} s measured after ${warmupSeconds} s warm-up each; appends: role user, ${content.length} characters; ${conversations} conversations: one autocannon each, run together (req/s summed, p50/p99/max the worst one's)`,
  );
  out.push(
    table(
      ['load', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'failed', '÷ raw inserts'],
      [
        loadRow('POST …/messages, 1 conversation (row lock: serialized)', one, ratioOne),
        loadRow(`POST …/messages, ${conversations} conversations (${perConversation} conns each)`, many, ratioMany),
        loadRow(`GET …/messages?limit=${listLimit} (of ${listMessages}; ${Math.round(listBytes / 1024)} KiB)`, list, undefined),
        [
          insertsLabel(inserts),
          '-',
          fmt(inserts.insertsPerSecond),
          fmt(inserts.latencyMs.p50, 2),
          fmt(inserts.latencyMs.p99, 2),
          fmt(inserts.latencyMs.max, 1),
          fmt(inserts.errors),
          '-',
        ],
      ],
    ),
  );
  out.push(`  ${postgresServerLine(inserts)}`);
  out.push('');
  out.push('CPU during the measured runs (% of one core; postgres = the client backends of the bench database; host = % of all cores, every process on it)');
  const names = ['gateway', 'conversations', 'identity', 'postgres', 'load generator'];
  const cpuRow = (name: string, s: LoadSummary) => [name, ...names.map((n) => fmt(s.cpu.processes[n])), fmt(s.cpu.hostBusyPercent)];
  out.push(
    table(
      ['load', ...names, 'host%'],
      [cpuRow('append, 1 conversation', one), cpuRow(`append, ${conversations} conversations`, many), cpuRow(`list ${listLimit}`, list)],
    ),
  );
  // The 1-conversation ratio has no target (appends to one conversation are serialized).
  out.push(`(info) appends/s (1 conversation) ÷ raw Postgres inserts/s: ${fmt(ratioOne, 2)}, no target: appends to one conversation are serialized`);
  return out;
}
