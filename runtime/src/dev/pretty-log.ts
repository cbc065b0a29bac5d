/**
 * `npm start` at a terminal: each JSON log line of a component rendered for a person (time,
 * level, message, then the other fields as key=value). Lines that are not JSON pass unchanged;
 * off a terminal nothing is rendered, so what is piped or collected stays JSON.
 */

const levels: Record<number, { name: string; colour: string }> = {
  10: { name: 'TRACE', colour: '\x1b[90m' },
  20: { name: 'DEBUG', colour: '\x1b[90m' },
  30: { name: 'INFO ', colour: '\x1b[32m' },
  40: { name: 'WARN ', colour: '\x1b[33m' },
  50: { name: 'ERROR', colour: '\x1b[31m' },
  60: { name: 'FATAL', colour: '\x1b[41m' },
};
/** Said by the prefix, the level or the time already. */
const shown = new Set(['level', 'time', 'svc', 'msg', 'pid', 'hostname']);

const valueText = (value: unknown) => (typeof value === 'string' ? (/^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)) : JSON.stringify(value));

export function prettyLine(line: string, colour = true): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry) || !('level' in entry)) return line;
  const record = entry as Record<string, unknown>;
  const level = levels[record.level as number] ?? { name: String(record.level).padEnd(5), colour: '' };
  const time = typeof record.time === 'string' ? record.time.slice(11, 23) : '';
  const fields = Object.entries(record)
    .filter(([key]) => !shown.has(key))
    .map(([key, value]) => `${key}=${valueText(value)}`)
    .join(' ');
  const paint = (text: string, code: string) => (colour && code ? `${code}${text}\x1b[0m` : text);
  return [time, paint(level.name, level.colour), record.msg ?? '', fields && paint(fields, '\x1b[90m')].filter(Boolean).join(' ');
}
