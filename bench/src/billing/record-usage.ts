import { ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { MeshTokens } from '@switchboard/runtime/mesh-token';
import { closedLoop, Tally } from '../measure/loop.js';
import type { BenchSession } from '../measure/session.js';
import type { Account } from './accounts.js';
import { callTimeoutMs, concurrency, maxCalls, usageShape } from './settings.js';

export type RecordUsage = (account: Account, generationId: string) => Promise<{ costUsd: string; duplicate: boolean }>;

/** RecordUsage as the data plane calls it: one h2c connection (Connect binary), a mesh token of caller "data-plane". */
export async function usageRecorder(session: BenchSession, mesh: Mesh): Promise<RecordUsage> {
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
  return (account, generationId) =>
    usage.recordUsage({ generationId, keyId: account.keyId, workspaceId: account.workspaceId, ...usageShape }, { timeoutMs: callTimeoutMs });
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

/** `concurrency` loops calling RecordUsage for `seconds`, the accounts in turn; latencies of fresh charges only. */
export async function drive(record: RecordUsage, accounts: Account[], runId: string, phase: string, seconds: number): Promise<Drive> {
  const tally = new Tally();
  let lastAnswerAt = 0;
  const firstCallAt = performance.now();
  await closedLoop(concurrency, { maxCalls, seconds }, async (n) => {
    const account = accounts[n % accounts.length];
    const started = performance.now();
    try {
      const answer = await record(account, `gen_bench_${runId}_${phase}_${n}`);
      lastAnswerAt = performance.now();
      if (answer.duplicate) tally.wrong('a fresh generation id answered duplicate: true');
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
