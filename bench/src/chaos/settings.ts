import { envWholeNumber as seconds } from '../measure/settings.js';

/** The scenarios `npm run bench:chaos` runs, each in a world of its own. */
export const scenarioNames = ['mixed', 'money'] as const;
export type ScenarioName = (typeof scenarioNames)[number];

/** CHAOS_SCENARIOS: a comma-separated subset of scenarioNames, in their order (default: all). */
export function chosenScenarios(): ScenarioName[] {
  const raw = process.env.CHAOS_SCENARIOS;
  if (!raw) return [...scenarioNames];
  const chosen = raw.split(',').map((name) => name.trim());
  const unknown = chosen.filter((name) => !(scenarioNames as readonly string[]).includes(name));
  if (unknown.length) throw new Error(`CHAOS_SCENARIOS: unknown scenario ${unknown.join(', ')} (known: ${scenarioNames.join(', ')})`);
  return scenarioNames.filter((name) => chosen.includes(name));
}

/** How long each fault lasts. */
export const downSeconds = seconds('CHAOS_DOWN_SECONDS', 3);
/** Steady load before the first fault and after each. */
export const steadySeconds = seconds('CHAOS_STEADY_SECONDS', 4);
/** The mixed scenario's operations started per second. */
export const ratePerSecond = seconds('CHAOS_RATE', 40);
/** Where to write each component's output (`<dir>/<scenario>/<component>.log`), when set. */
export const logDir = process.env.CHAOS_LOG_DIR;
