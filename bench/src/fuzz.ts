/**
 * Fuzzing, long budget (issue 11): the properties of `e2e/platform/fuzz.test.ts` (every operation
 * of the live /v1/openapi.json, generated valid and invalid requests as two users with real data
 * or with bad credentials, every answer checked against the contract by testkit/src/fuzz/oracle.ts), with
 * many more runs and a seed of its own each time unless one is given.
 *
 *   npm run bench:fuzz   (FUZZ_RUNS, default 300: runs per operation; FUZZ_SEED, default random:
 *                         the seed to replay a run with; FUZZ_OPERATIONS, a regular expression
 *                         over "METHOD /path" to fuzz only some operations)
 *
 * The mesh gets its own database on the Postgres startMesh finds (dropped at the end when it is
 * the local server). Prints a table of operations × runs × statuses seen, and every failure with
 * its seed, its shrunk request and the components' log lines for it; exits non-zero when any
 * operation failed. Results: also written to bench/results/fuzz-<time>.json.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startMesh } from '@switchboard/runtime/dev/mesh';
import { dropDatabase } from '@switchboard/runtime/infra';
import { type Json, operationsOf } from '@switchboard/testkit/fuzz/arbitraries';
import { ContractOracle } from '@switchboard/testkit/fuzz/oracle';
import { fuzzProperty } from '@switchboard/testkit/fuzz/property';
import { FuzzWorld, fuzzMeshEnv } from '@switchboard/testkit/fuzz/world';
import { table } from '@switchboard/testkit/text-table';
import fc from 'fast-check';
import { finishBench, machineFacts, runBench } from './report.js';

const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a positive integer, not ${raw}`);
  return Number(raw);
}

interface OperationResult {
  operation: string;
  runs: number;
  statuses: Record<string, number>;
  seconds: number;
  failure?: string;
}

async function main(): Promise<number> {
  const startedAt = performance.now();
  const at = new Date().toISOString();
  const loadAverageAtStart = os.loadavg();
  const runs = positiveInt('FUZZ_RUNS', 300);
  const seed = positiveInt('FUZZ_SEED', Math.floor(Math.random() * 2 ** 31) + 1);
  const only = process.env.FUZZ_OPERATIONS ? new RegExp(process.env.FUZZ_OPERATIONS) : undefined;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-fuzz-'));
  const database = `switchboard_bench_fuzz_${process.pid}_${Date.now().toString(36)}`;
  console.log(`starting the mesh; FUZZ_SEED=${seed} FUZZ_RUNS=${runs}${only ? ` FUZZ_OPERATIONS=${only.source}` : ''}`);
  const mesh = await startMesh({ dataDir, randomPorts: true, database, env: { LOG_LEVEL: 'info', ...fuzzMeshEnv } });
  try {
    const doc = (await (await fetch(`${mesh.gatewayUrl}/v1/openapi.json`)).json()) as Json;
    const oracle = new ContractOracle(doc);
    const world = await FuzzWorld.create(mesh.gatewayUrl);
    // Each operation's seed is derived from its place in the whole document, as in the test: a failure replays alone with FUZZ_OPERATIONS.
    const operations = operationsOf(doc)
      .map((operation, index) => ({ operation, index }))
      .filter(({ operation }) => !only || only.test(operation.label));
    const results: OperationResult[] = [];
    for (const { operation, index } of operations) {
      const started = performance.now();
      const result: OperationResult = { operation: operation.label, runs: 0, statuses: {}, seconds: 0 };
      const observe = ({ status }: { status: number }) => {
        result.runs += 1;
        result.statuses[status] = (result.statuses[status] ?? 0) + 1;
      };
      const details = await fc.check(fuzzProperty(world, oracle, doc, operation, { observe, mesh }), { seed: seed + index, numRuns: runs });
      result.seconds = Math.round((performance.now() - started) / 100) / 10;
      if (details.failed) result.failure = `${fc.defaultReportMessage(details) ?? 'failed'}\n${(details.errorInstance as Error | undefined)?.message ?? ''}`;
      results.push(result);
      console.log(`${result.failure ? 'FAIL' : 'ok  '}  ${operation.label}  (${result.runs} requests, ${result.seconds} s)`);
    }

    const statuses = [...new Set(results.flatMap((r) => Object.keys(r.statuses)))].sort();
    const lines = [
      '',
      `Fuzzing: ${operations.length} operations × ${runs} runs, FUZZ_SEED=${seed} (requests include fast-check's shrinking of failures)`,
      table(
        ['operation', 'requests', ...statuses, 's', 'result'],
        results.map((r) => [r.operation, String(r.runs), ...statuses.map((s) => String(r.statuses[s] ?? '')), String(r.seconds), r.failure ? 'FAIL' : 'ok']),
      ),
      '',
      `party sessions mended or users replaced: a ${world.mended.a}, b ${world.mended.b}`,
    ];
    const failures = results.filter((r) => r.failure);
    for (const failure of failures) lines.push('', `FAIL ${failure.operation}`, failure.failure!);
    const report = { at, machine: machineFacts(loadAverageAtStart), seed, runs, operations: results, totalSeconds: 0 };
    return await finishBench({
      name: 'fuzz',
      lines,
      targets: [],
      errors: failures.map((f) => `${f.operation}: contract broken (FUZZ_SEED=${seed}; details above)`),
      startedAt,
      at,
      resultsDir,
      report,
    });
  } finally {
    await mesh.stop();
    if (!process.env.DATABASE_URL) await dropDatabase(`postgres://postgres@127.0.0.1:5432/${database}`).catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

runBench(main);
