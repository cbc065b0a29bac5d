import { ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { closedLoop, Tally } from '../measure/loop.js';
import type { BenchSession } from '../measure/session.js';
import { usagePublisher } from '../measure/usage-records.js';
import type { Account } from './accounts.js';
import { callTimeoutMs, concurrency, maxCalls, usageShape } from './settings.js';

/** One way usage enters billing: a usage of `account`, its cost as answered, and whether the generation id was known already. */
export interface Feed {
  /** Its key in the JSON report and in generation ids. */
  key: 'workStream' | 'recordUsage';
  /** As the printout names it. */
  name: string;
  /** How the bench sends it, for the printout. */
  how: string;
  send(account: Account, generationId: string): Promise<{ costUsd: string; duplicate: boolean }>;
}

/**
 * The data plane's way (docs/money-path.md#usage): a UsageRecord of service/fast (tier fast,
 * priced by the shared pricing module) published to the work stream with the generation id as
 * message id, done when JetStream acknowledged it; billing settles it later, in batches.
 */
export async function workStreamFeed(session: BenchSession, mesh: Mesh): Promise<Feed> {
  const publish = await usagePublisher(session, mesh);
  return {
    key: 'workStream',
    name: 'work stream',
    how: 'UsageRecords published to the work stream (JetStream, msgID = generation id, acked), one NATS connection',
    send: (account, generationId) => publish({ generationId, keyId: account.keyId, workspaceId: account.workspaceId, tier: 'fast', ...usageShape }),
  };
}

/** RecordUsage as an external data plane calls it (docs/api/internal-calls.md#recordusage): one h2c connection (Connect binary), a mesh token of caller "data-plane". */
export async function recordUsageFeed(session: BenchSession, mesh: Mesh): Promise<Feed> {
  // One token for the whole run: minted tokens live 5 minutes (runtime/src/mesh-token.ts).
  const meshToken = await new MeshTokens(mesh.env.SWITCHBOARD_MESH_SECRET).mint('billing', { caller: 'data-plane' });
  const addToken: Interceptor = (next) => (req) => {
    req.header.set('authorization', `Bearer ${meshToken}`);
    return next(req);
  };
  const sessionManager = new Http2SessionManager(mesh.urls.billing);
  session.defer('h2c session', async () => sessionManager.abort());
  const usage = createClient(
    UsageService,
    createConnectTransport({ baseUrl: mesh.urls.billing, httpVersion: '2', useBinaryFormat: true, sessionManager, interceptors: [addToken] }),
  );
  return {
    key: 'recordUsage',
    name: 'RecordUsage',
    how: 'RecordUsage calls, one h2c connection (Connect binary, mesh token of data-plane)',
    send: (account, generationId) =>
      usage.recordUsage({ generationId, keyId: account.keyId, workspaceId: account.workspaceId, ...usageShape }, { timeoutMs: callTimeoutMs }),
  };
}

export interface Drive {
  ok: number;
  failed: number;
  errors: number;
  /** performance.now() of the first call and of the last answer. */
  firstCallAt: number;
  lastAnswerAt: number;
  latencies: number[];
  firstProblem?: string;
}

/** `concurrency` loops sending usages through `feed` for `seconds`, the accounts in turn; latencies of fresh usages only. */
export async function drive(feed: Feed, accounts: Account[], runId: string, phase: string, seconds: number): Promise<Drive> {
  const tally = new Tally();
  let lastAnswerAt = 0;
  const firstCallAt = performance.now();
  await closedLoop(concurrency, { maxCalls, seconds }, async (n) => {
    const account = accounts[n % accounts.length];
    const started = performance.now();
    try {
      const answer = await feed.send(account, `gen_bench_${runId}_${feed.key}_${phase}_${n}`);
      lastAnswerAt = performance.now();
      if (answer.duplicate) tally.wrong('a fresh generation id answered duplicate');
      else {
        tally.pass(lastAnswerAt - started);
        account.recorded = account.recorded.plus(answer.costUsd);
        account.calls += 1;
      }
    } catch (err) {
      lastAnswerAt = performance.now();
      tally.error(ConnectError.from(err).message);
    }
  });
  const { ok, failed, errors, latencies, firstProblem } = tally;
  return { ok, failed, errors, firstCallAt, lastAnswerAt, latencies, firstProblem };
}
