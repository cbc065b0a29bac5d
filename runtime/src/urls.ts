import { invalidArgument } from './errors.js';

/** Longer URLs are refused (they would only be abused: receivers are ordinary endpoints). */
export const maxUrlLength = 2048;

/**
 * A receiver URL checked for syntax at registration (docs/webhooks.md#endpoints): absolute, `https:`, a host,
 * no credentials, at most 2048 characters. Returns its normalized form (WHATWG URL). Where it
 * resolves to is checked at every delivery attempt, not here (DNS can change).
 */
export function parseHttpsUrl(raw: string, field: string): string {
  const trimmed = raw.trim();
  if (trimmed === '') throw invalidArgument(field, `${field} is required: an https:// URL.`);
  if (trimmed.length > maxUrlLength) throw invalidArgument(field, `${field} may be at most ${maxUrlLength} characters.`);
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw invalidArgument(field, `${field} is not a valid URL.`);
  }
  if (url.protocol !== 'https:') throw invalidArgument(field, `${field} must use https:// (plain http is refused).`);
  if (!url.hostname) throw invalidArgument(field, `${field} must name a host.`);
  if (url.username || url.password) throw invalidArgument(field, `${field} must not carry credentials; sign deliveries with the signing secret instead.`);
  if (url.href.length > maxUrlLength) throw invalidArgument(field, `${field} may be at most ${maxUrlLength} characters.`);
  return url.href;
}
