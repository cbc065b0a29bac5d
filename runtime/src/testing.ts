/**
 * Polls `probe` until it gives a value (anything but undefined, null or false), or fails after
 * `timeoutMs` with the last error it threw. Tests wait for asynchronous effects with this,
 * never with a fixed sleep.
 */
export async function eventually<T>(
  probe: () => T | Promise<T>,
  what: string,
  timeoutMs = 10_000,
  intervalMs = 25,
): Promise<Exclude<T, undefined | null | false>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
