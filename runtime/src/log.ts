import { type Logger, pino } from 'pino';
import { activeTraceFields, tracingOn } from './trace-context.js';

export type { Logger };

/** What a log line (or a row's last_error) says of a failure: its class and message, at most 1000 characters. */
export function errorMessage(err: unknown): string {
  return (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 1000);
}

/**
 * Field names whose values never reach a log line, at any of the first four levels. (`code` is
 * not among them: it is how errors name themselves; no request body is ever logged.)
 */
const secretFields = [
  'authorization',
  'password',
  'new_password',
  'current_password',
  'newPassword',
  'currentPassword',
  'full_key',
  'fullKey',
  'secret',
  'signing_secret',
  'token',
  'access_token',
  'accessToken',
  'refresh_token',
  'refreshToken',
  'mfa_token',
  'mfaToken',
  'recovery_code',
  'recovery_codes',
  'otp',
  'cookie',
  'set-cookie',
];

export const redactPaths = secretFields.flatMap((field) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(field) ? field : `["${field}"]`;
  const dot = key.startsWith('[') ? '' : '.';
  return [key, `*${dot}${key}`, `*.*${dot}${key}`, `*.*.*${dot}${key}`];
});

/**
 * A component's logger: JSON lines on stdout, or on `destination` (`npm start` renders its own at a terminal).
 *
 * Stdout is written synchronously, each line as it is logged, as Node writes its own stdout to a
 * pipe. pino's default (asynchronous) destination left the lines of the last moments in flight and
 * flushed them at `process.exit` with a synchronous loop that retries every failed write, not
 * only EAGAIN (sonic-boom 4): when the reader was gone (`npm start`'s runner killed), a component
 * that stopped quickly (the gateway, in 3 ms) reached the exit before its broken pipe was reported,
 * and retried the write every 100 ms forever, deaf to SIGTERM. Written synchronously, the first
 * line after the reader died meets EPIPE at once, pino drops the lines from then on, and nothing
 * is left to flush at the exit (docs/decisions.md#a-dead-runner-and-the-logs).
 */
export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info', destination?: { write(line: string): void }): Logger {
  const options = {
    level,
    base: { svc: component },
    redact: { paths: redactPaths, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    // The request id stays the correlation key; when tracing, a line written in a span names it too.
    mixin: tracingOn() ? activeTraceFields : undefined,
  };
  return pino(options, destination ?? pino.destination({ dest: 1, sync: true }));
}
