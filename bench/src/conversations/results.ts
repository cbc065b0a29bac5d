import { type InsertLoopResult, insertLoop } from '../measure/inserts.js';
import { round } from '../measure/latency.js';
import type { BenchSession } from '../measure/session.js';
import { check, machineFacts } from '../report.js';
import { durationSeconds, warmupSeconds } from '../scenarios.js';
import type { Prepared } from './gateway-calls.js';
import type { Loads } from './loads.js';
import { connections, content, conversations, fillConcurrency, listLimit, listMessages, minRatio } from './settings.js';

/** The JSON report of bench:conversations (docs/operations.md). */
export function conversationsResults(
  session: BenchSession,
  measured: {
    prepared: Prepared;
    loads: Loads;
    stored: Record<string, number>;
    inserts: InsertLoopResult;
    meshStartSeconds: number;
    natsSetup: string;
    errors: string[];
  },
) {
  const { loads, inserts, errors, stored, meshStartSeconds } = measured;
  const { one, many, list, perConversation } = loads;
  const { fillSeconds, listBytes } = measured.prepared;
  const natsSetup = measured.natsSetup;
  const at = session.at;
  const toInserts = (rps: number) => (inserts.insertsPerSecond > 0 ? round(rps / inserts.insertsPerSecond, 3) : 0);
  const ratioOne = toInserts(one.rps);
  const ratioMany = toInserts(many.rps);
  const targets = [check(`appends/s (${conversations} conversations) ÷ raw Postgres inserts/s`, ratioMany, '>=', minRatio, 'ratio')];

  return {
    at,
    machine: machineFacts(session.loadAverageAtStart),
    settings: {
      connections,
      conversations,
      connectionsPerConversation: perConversation,
      durationSeconds,
      warmupSeconds,
      contentCharacters: content.length,
      listMessages,
      listLimit,
      listResponseBytes: listBytes,
      nats: natsSetup,
      insertLoop,
    },
    meshStartSeconds,
    fill: { messages: listMessages, seconds: fillSeconds, concurrency: fillConcurrency },
    append: {
      oneConversation: { ...one, ratioToInserts: ratioOne },
      manyConversations: { ...many, ratioToInserts: ratioMany },
    },
    list,
    storedMessages: stored,
    postgresInserts: inserts,
    targets,
    errors,
    totalSeconds: 0,
  };
}

export type ConversationsReport = ReturnType<typeof conversationsResults>;
