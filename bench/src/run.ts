/**
 * `npm run bench`: boots the whole mesh on free ports, measures its idle memory, runs the load
 * scenarios against the gateway and against a single-process baseline doing the same work, a
 * raw Postgres insert loop as a second reference, then peak memory; prints a table and writes
 * bench/results/<timestamp>.json. Exits non-zero only when something crashed or could not be
 * measured; a missed target is reported as FAIL.
 *
 * Isolation: unless NATS_URL / DATABASE_URL are set, the bench starts its own nats-server in
 * its temp dir (so its consumers never take events from another dev mesh on :4222) and gives
 * the mesh its own database (dropped at the end) on the Postgres startMesh finds.
 *
 * Load only ever goes to 127.0.0.1; every run is bounded in time and request count, and a
 * watchdog ends the whole bench if it overruns.
 */
import path from 'node:path';
import { formatReport, resultsDir, runBench, writeReport } from './report.js';
import { Bench } from './run/bench.js';
import { scenarios } from './scenarios.js';

/** Ends the whole bench if it overruns: start-up, every scenario twice-plus over, the insert loop and the stops. */
const budgetMs = 180_000 + scenarios.reduce((sum, s) => sum + (s.warmupSeconds + s.durationSeconds) * 1000 * 4, 0);

/** On the watchdog or a signal: the cleanup, then exit with `code` (the report is not written). */
function stopOnInterrupt(bench: Bench): NodeJS.Timeout {
  let interrupted: string | undefined;
  const interrupt = (reason: string, code: number) => {
    if (interrupted) return;
    interrupted = reason;
    bench.report.errors.push(reason);
    bench.progress(`${reason}: stopping everything`);
    void bench.cleanup().finally(() => process.exit(code));
  };
  const watchdog = setTimeout(() => interrupt(`watchdog: the bench ran over ${budgetMs / 1000} s`, 3), budgetMs);
  watchdog.unref();
  process.once('SIGINT', () => interrupt('interrupted (SIGINT)', 130));
  process.once('SIGTERM', () => interrupt('terminated (SIGTERM)', 143));
  return watchdog;
}

async function main(): Promise<number> {
  const bench = new Bench();
  const watchdog = stopOnInterrupt(bench);
  try {
    await bench.run();
  } catch (err) {
    bench.report.errors.push((err as Error).stack ?? String(err));
  }
  bench.progress('stopping everything');
  await bench.cleanup();
  clearTimeout(watchdog);
  bench.finish();
  console.log(formatReport(bench.report));
  try {
    const file = await writeReport(bench.report, resultsDir);
    console.log(`\nWrote ${path.relative(process.cwd(), file)}`);
  } catch (err) {
    bench.report.errors.push(`writing the results: ${(err as Error).message}`);
  }
  return bench.report.errors.length ? 1 : 0;
}

runBench(main);
