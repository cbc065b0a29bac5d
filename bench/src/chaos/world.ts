import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type Component, components } from '@switchboard/runtime/dev/mesh';
import type { ChaosWorld } from '@switchboard/testkit/chaos/world';
import { logDir, type ScenarioName } from './settings.js';

export interface ScenarioResult {
  passed: boolean;
  /** The scenario's printed tables. */
  report: string;
  /** What goes into bench/results/chaos-<time>.json for it. */
  json: Record<string, unknown>;
}

type OnComponentExit = (component: Component, code: number | string | null, lastLines: string[]) => void;

/** Starts a scenario's world, runs it, keeps its components' output under CHAOS_LOG_DIR when set, and stops it. */
export async function withWorld<W extends ChaosWorld>(
  scenario: ScenarioName,
  start: (options: { onComponentExit: OnComponentExit }) => Promise<W>,
  run: (world: W) => Promise<ScenarioResult>,
): Promise<ScenarioResult> {
  const world = await start({
    onComponentExit: (component, code, lastLines) => console.error(`${scenario}: ${component} exited on its own (${code}):\n${lastLines.join('\n')}`),
  });
  try {
    const result = await run(world);
    if (logDir) {
      const dir = path.join(logDir, scenario);
      await mkdir(dir, { recursive: true });
      for (const component of components) await writeFile(path.join(dir, `${component}.log`), world.mesh.output(component));
      result.report += `\n  wrote the components' output to ${dir}`;
    }
    return result;
  } finally {
    await world.stop();
  }
}
