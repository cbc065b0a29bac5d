import { invalidArgument } from './errors.js';

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time with every part in range (Date.parse alone takes February 30); undefined otherwise. */
export function parseRfc3339(raw: string): Date | undefined {
  const m = rfc3339.exec(raw);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return undefined;
  if (m[9] && (Number(m[10]) > 23 || Number(m[11]) > 59)) return undefined;
  const at = new Date(raw);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/** A time parameter of a request (surrounding spaces ignored): undefined when empty, a 400 naming `field` when not RFC 3339. */
export function timeParameter(raw: string, field: string): Date | undefined {
  const text = raw.trim();
  if (text === '') return undefined;
  const at = parseRfc3339(text);
  if (!at) throw invalidArgument(field, `${field} must be an RFC 3339 time such as "2026-11-24T09:30:00Z".`);
  return at;
}
