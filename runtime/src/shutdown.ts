import { readDuration } from './config.js';
import type { Logger } from './log.js';
import { flushTraces } from './trace-context.js';

/** How a component stops on SIGTERM (docs/operations.md, "Shutdown"). */
export interface ShutdownSettings {
  /**
   * SHUTDOWN_DELAY: how long a component keeps serving, already unready, before it closes its
   * listener, so that load balancers see the readiness change and stop sending it requests.
   */
  delayMs: number;
  /** DRAIN_TIMEOUT: how long requests in flight may take to finish once the listener is closed. */
  drainTimeoutMs: number;
}

export function readShutdownSettings(env: Record<string, string | undefined> = process.env): ShutdownSettings {
  return { delayMs: readDuration('SHUTDOWN_DELAY', '0s', env), drainTimeoutMs: readDuration('DRAIN_TIMEOUT', '20s', env) };
}

/** What a component does to stop, in order; each phase starts when the one before has ended. */
export interface ShutdownPhases {
  /** Readiness off at once (gateway /readyz 503, Health NOT_SERVING); everything still served. */
  unready(): void;
  /** Stop accepting connections and wait for requests in flight, up to `drainTimeoutMs`. */
  drain(drainTimeoutMs: number): Promise<void>;
  /** Consumers, relays, pools: what the requests needed, closed once they are done. */
  release(): Promise<void>;
}

/** Margin past delay + drain for `release` before the process gives up waiting on it. */
const releaseMarginMs = 10_000;

/**
 * Stops the process gracefully on the first SIGTERM, SIGINT or loss of its runner (the IPC
 * channel of `npm start`): unready, SHUTDOWN_DELAY, drain (DRAIN_TIMEOUT), release, exit 0. A
 * shutdown that overruns the whole budget exits 1, so a stuck pool never keeps a pod Terminating.
 */
export function stopGracefully(log: Logger, phases: ShutdownPhases, settings: ShutdownSettings = readShutdownSettings()): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const started = performance.now();
    log.info({ signal, delay_ms: settings.delayMs, drain_timeout_ms: settings.drainTimeoutMs }, 'shutting down: unready');
    setTimeout(
      () => {
        log.error('shutdown overran SHUTDOWN_DELAY + DRAIN_TIMEOUT + 10 s: exiting now');
        process.exit(1);
      },
      settings.delayMs + settings.drainTimeoutMs + releaseMarginMs,
    ).unref();
    try {
      phases.unready();
      if (settings.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, settings.delayMs));
      log.info('shutting down: draining requests in flight');
      await phases.drain(settings.drainTimeoutMs);
      log.info('shutting down: releasing consumers and pools');
      await phases.release();
      // The spans of the last requests leave before the process does (nothing to do untraced).
      await flushTraces();
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
    log.info({ ms: Math.round(performance.now() - started) }, 'stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  if (process.send) process.once('disconnect', () => void stop('runner exited'));
}

/**
 * Closes an HTTP server the graceful way: no new connections; requests that arrive on open
 * keep-alive connections are still answered, with `Connection: close` (the caller's
 * `closing()` check); idle connections end now; busy ones end after their answer, and any left
 * after `drainTimeoutMs` are cut.
 */
export async function closeHttpServer(
  server: { close(callback: () => void): unknown; closeIdleConnections(): void; closeAllConnections(): void },
  drainTimeoutMs: number,
): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // Connections that finish an answer during the drain become idle: end them as they do.
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  const cut = setTimeout(() => server.closeAllConnections(), drainTimeoutMs);
  await closed;
  clearInterval(idle);
  clearTimeout(cut);
}
