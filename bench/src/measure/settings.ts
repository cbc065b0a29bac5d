/** A whole number (seconds, connections) from the environment; the fallback when it is unset or not digits. */
export function envWholeNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  return raw && /^\d+$/.test(raw) ? Number(raw) : fallback;
}

/** A positive whole number from the environment, at most `max`; the fallback when it is unset or not one. */
export function envPositiveInt(name: string, fallback: number, max = Number.POSITIVE_INFINITY): number {
  const raw = process.env[name];
  return raw && /^[1-9]\d*$/.test(raw) ? Math.min(Number(raw), max) : fallback;
}

/** BENCH_NODE_FLAGS: extra flags for every component, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof". */
export const benchNodeFlags = (): string[] | undefined => process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean);

/** A number (decimals allowed) from the environment; the fallback when it is unset or not one. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  return raw && /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : fallback;
}
