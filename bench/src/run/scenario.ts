import { components, type Mesh } from '@switchboard/runtime/dev/mesh';
import { runLoad, type Target } from '../measure/load.js';
import { postgresBackends } from '../measure/postgres.js';
import { type BenchReport, check, type ScenarioReport } from '../report.js';
import type { BenchContext, Scenario } from '../scenarios.js';

/** JSON with its keys sorted, to compare two answers whatever their key order. */
function canonical(value: unknown): string {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Calls a target once; it must answer 2xx before any load is sent to it. */
async function probe(target: Target): Promise<unknown> {
  const response = await fetch(target.url, { method: target.method ?? 'GET', headers: target.headers, body: target.body, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  if (response.status < 200 || response.status > 299)
    throw new Error(`${target.method ?? 'GET'} ${target.url} answered ${response.status}: ${text.slice(0, 500)}`);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** What a scenario needs of the bench around it. */
export interface ScenarioRig {
  ctx: BenchContext;
  mesh: Mesh;
  natsPid?: number;
  baselinePid?: number;
  progress(message: string): void;
  /** A component or the baseline that exited (a crash), if any. */
  deadProcess(): string | undefined;
}

/**
 * One scenario: its setup, the first answers of the mesh and of each baseline (the primary's must
 * be the same JSON), then the load on the mesh and on each baseline. A failure is the scenario's
 * `error` and one of the bench's errors; a ratio below `minRatio` is a failed target.
 */
export async function runScenario(scenario: Scenario, rig: ScenarioRig, bench: BenchReport): Promise<ScenarioReport> {
  const report: ScenarioReport = {
    name: scenario.name,
    description: scenario.description,
    connections: scenario.connections,
    durationSeconds: scenario.durationSeconds,
    warmupSeconds: scenario.warmupSeconds,
    baselines: [],
  };
  try {
    await measure(scenario, rig, report);
    if (scenario.minRatio !== undefined)
      bench.targets.push(check(`${scenario.name}: mesh req/s ÷ baseline req/s`, report.ratio ?? 0, '>=', scenario.minRatio, 'ratio'));
  } catch (err) {
    report.error = (err as Error).message;
    bench.errors.push(`scenario ${scenario.name}: ${report.error}`);
  }
  return report;
}

async function measure(scenario: Scenario, rig: ScenarioRig, report: ScenarioReport): Promise<void> {
  const shape = { connections: scenario.connections, durationSeconds: scenario.durationSeconds, warmupSeconds: scenario.warmupSeconds };
  const databaseUrl = rig.mesh.env.DATABASE_URL;
  rig.progress(`scenario ${scenario.name}: setup`);
  const target = await scenario.setup(rig.ctx);
  const baselines = scenario.baselines?.(rig.ctx, target) ?? [];
  const meshAnswer = await probe(target);
  const answers = await Promise.all(baselines.map((b) => probe(b.target)));
  const primaryIndex = baselines.findIndex((b) => b.primary);
  if (primaryIndex >= 0) report.sameResponse = canonical(meshAnswer) === canonical(answers[primaryIndex]);

  rig.progress(`scenario ${scenario.name}: mesh, ${shape.connections} connections, ${shape.warmupSeconds} s + ${shape.durationSeconds} s`);
  const mesh = await runLoad(target, shape, async () => ({
    ...Object.fromEntries(components.map((component) => [component, [rig.mesh.pid(component)]])),
    'nats-server': [rig.natsPid],
    postgres: await postgresBackends(databaseUrl),
  }));
  report.mesh = mesh;
  const dead = rig.deadProcess();
  if (dead) throw new Error(dead);
  for (const baseline of baselines) {
    rig.progress(`scenario ${scenario.name}: baseline "${baseline.name}"`);
    const result = await runLoad(baseline.target, shape, async () => ({ baseline: [rig.baselinePid], postgres: await postgresBackends(databaseUrl) }));
    const ratio = result.rps > 0 ? Math.round((mesh.rps / result.rps) * 1000) / 1000 : undefined;
    report.baselines.push({ name: baseline.name, primary: Boolean(baseline.primary), result, ratio });
  }
  report.ratio = report.baselines.find((b) => b.primary)?.ratio;
}
