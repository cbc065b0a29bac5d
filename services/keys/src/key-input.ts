import type { Value } from '@bufbuild/protobuf/wkt';
import { KeyScopeSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { invalidArgument } from '@switchboard/runtime/errors';
import { type RoutingPolicy, routingPolicies } from '@switchboard/runtime/model-catalog';
import { parsePlainDecimal } from '@switchboard/runtime/money';
import { parseRfc3339 } from '@switchboard/runtime/rfc3339';
import { enumToWire } from '@switchboard/runtime/wire-enum';

/** What a request may say about a key, checked field by field (each error names its field). */

export const maxNameCodePoints = 100;

/** 1..100 Unicode code points after trimming (docs/conventions.md#limits); the trimmed name is what is stored. */
export function parseKeyName(raw: string, field = 'name'): string {
  const name = raw.trim();
  if (name === '') throw invalidArgument(field, 'A key name is required (1 to 100 characters, not only spaces).');
  const length = Array.from(name).length;
  if (length > maxNameCodePoints) throw invalidArgument(field, `A key name may be at most ${maxNameCodePoints} characters; this one has ${length}.`);
  return name;
}

/** A cap: a non-negative plain decimal string ("0" blocks at once), kept as given. */
export function parseSpendCap(raw: string, field = 'monthly_spend_cap_usd'): string {
  return parsePlainDecimal(raw, field, { maxIntegerDigits: 15, maxFractionDigits: 12 });
}

/** An estimate of the data plane, in the same notation as a cap. */
export function parseEstimate(raw: string, field = 'estimated_cost_usd'): string {
  return parsePlainDecimal(raw, field, { maxIntegerDigits: 15, maxFractionDigits: 18 });
}

/** cn-only, overseas-only or any; absent means any. */
export function parseRoutingPolicy(raw: string | undefined, field = 'routing_policy'): RoutingPolicy {
  if (raw === undefined) return 'any';
  const policy = raw.trim();
  if (!(routingPolicies as readonly string[]).includes(policy)) {
    throw invalidArgument(field, `${field} must be one of ${routingPolicies.join(', ')}.`);
  }
  return policy as RoutingPolicy;
}

export const defaultThresholdPct = 80;

/** 1..100, default 80. */
export function parseThresholdPct(raw: number | undefined, field = 'threshold_pct'): number {
  if (raw === undefined) return defaultThresholdPct;
  if (!Number.isInteger(raw) || raw < 1 || raw > 100) throw invalidArgument(field, `${field} must be a whole percent from 1 to 100.`);
  return raw;
}

export type StatusFilter = 'active' | 'revoked' | undefined;

/** The list filter: active, revoked, or empty for both. */
export function parseStatusFilter(raw: string, field = 'status'): StatusFilter {
  if (raw === '') return undefined;
  if (raw === 'active' || raw === 'revoked') return raw;
  throw invalidArgument(field, 'status must be active or revoked (or left out for both).');
}

/** The scopes a key may have, in their canonical order (the proto's KeyScope, docs/api/keys.md#scopes). */
export const keyScopes: readonly string[] = KeyScopeSchema.values
  .filter((value) => value.number !== 0)
  .map((value) => enumToWire(KeyScopeSchema, value.number));

const describe = (value: Value): string =>
  value.kind.case === undefined ? 'nothing' : value.kind.case.replace('Value', '').replace('struct', 'object').replace('list', 'array');

/** `scopes`: a non-empty array of distinct known scopes, kept in canonical order; absent: undefined. */
export function parseScopes(value: Value | undefined, field = 'scopes'): string[] | undefined {
  if (value === undefined) return undefined;
  if (value.kind.case !== 'listValue') throw invalidArgument(field, `${field} must be an array of scopes (${keyScopes.join(', ')}), not ${describe(value)}.`);
  const items = value.kind.value.values;
  if (items.length === 0) throw invalidArgument(field, `${field} must name at least one scope (${keyScopes.join(', ')}).`);
  const seen = new Set<string>();
  items.forEach((item, i) => {
    const scope = item.kind.case === 'stringValue' ? item.kind.value : undefined;
    if (scope === undefined || !keyScopes.includes(scope)) throw invalidArgument(`${field}[${i}]`, `${field}[${i}] must be one of ${keyScopes.join(', ')}.`);
    if (seen.has(scope)) throw invalidArgument(`${field}[${i}]`, `${field}[${i}] repeats ${scope}.`);
    seen.add(scope);
  });
  return keyScopes.filter((scope) => seen.has(scope));
}

/** How far ahead an expiry may be set. */
export const maxExpiryYears = 10;

/** `expires_at`: an RFC 3339 time after `now` and at most 10 years ahead, or null (never); absent: undefined. */
export function parseExpiresAt(value: Value | undefined, now: Date, field = 'expires_at'): Date | null | undefined {
  if (value === undefined) return undefined;
  if (value.kind.case === 'nullValue') return null;
  const at = value.kind.case === 'stringValue' ? parseRfc3339(value.kind.value) : undefined;
  if (!at) throw invalidArgument(field, `${field} must be an RFC 3339 time such as "2027-01-01T00:00:00Z", or null for never.`);
  if (at.getTime() <= now.getTime()) throw invalidArgument(field, `${field} must be in the future.`);
  const latest = new Date(now);
  latest.setUTCFullYear(latest.getUTCFullYear() + maxExpiryYears);
  if (at > latest) throw invalidArgument(field, `${field} may be at most ${maxExpiryYears} years ahead.`);
  return at;
}

export const maxAllowedModels = 50;
export const maxModelPatternLength = 200;

/**
 * `allowed_models`: null (every model) or 1..50 distinct patterns of 1..200 code points after
 * trimming (the trimmed pattern is stored; `*` is the data plane's to match); absent: undefined.
 */
export function parseAllowedModels(value: Value | undefined, field = 'allowed_models'): string[] | null | undefined {
  if (value === undefined) return undefined;
  if (value.kind.case === 'nullValue') return null;
  if (value.kind.case !== 'listValue') throw invalidArgument(field, `${field} must be an array of model patterns or null, not ${describe(value)}.`);
  const items = value.kind.value.values;
  if (items.length === 0) throw invalidArgument(field, `${field} must hold 1 to ${maxAllowedModels} model patterns (null allows every model).`);
  if (items.length > maxAllowedModels) throw invalidArgument(field, `${field} may hold at most ${maxAllowedModels} model patterns; it has ${items.length}.`);
  const patterns: string[] = [];
  items.forEach((item, i) => {
    const at = `${field}[${i}]`;
    if (item.kind.case !== 'stringValue') throw invalidArgument(at, `${at} must be a string, not ${describe(item)}.`);
    const pattern = item.kind.value.trim();
    const length = Array.from(pattern).length;
    if (length === 0 || length > maxModelPatternLength) throw invalidArgument(at, `${at} must be 1 to ${maxModelPatternLength} characters (not only spaces).`);
    if (patterns.includes(pattern)) throw invalidArgument(at, `${at} repeats "${pattern}".`);
    patterns.push(pattern);
  });
  return patterns;
}

/** A key's rate limits; null: no such limit. */
export interface RateLimitsInput {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  maxConcurrent: number | null;
}

export const maxRateLimit = 1_000_000_000;

const rateLimitFields = { requests_per_minute: 'requestsPerMinute', tokens_per_minute: 'tokensPerMinute', max_concurrent: 'maxConcurrent' } as const;

/**
 * `rate_limits`: an object of the three limits, each a whole number from 1 to 1e9 or null; a limit
 * left out is null (the object replaces the previous one whole); null clears them all; absent: undefined.
 */
export function parseRateLimits(value: Value | undefined, field = 'rate_limits'): RateLimitsInput | undefined {
  if (value === undefined) return undefined;
  const limits: RateLimitsInput = { requestsPerMinute: null, tokensPerMinute: null, maxConcurrent: null };
  if (value.kind.case === 'nullValue') return limits;
  if (value.kind.case !== 'structValue')
    throw invalidArgument(field, `${field} must be an object (${Object.keys(rateLimitFields).join(', ')}) or null, not ${describe(value)}.`);
  for (const [name, limit] of Object.entries(value.kind.value.fields)) {
    const at = `${field}.${name}`;
    if (!Object.hasOwn(rateLimitFields, name))
      throw invalidArgument(at, `${at} is not a rate limit; the limits are ${Object.keys(rateLimitFields).join(', ')}.`);
    if (limit.kind.case === 'nullValue') continue;
    const n = limit.kind.case === 'numberValue' ? limit.kind.value : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > maxRateLimit)
      throw invalidArgument(at, `${at} must be a whole number from 1 to ${maxRateLimit}, or null for no limit.`);
    limits[rateLimitFields[name as keyof typeof rateLimitFields]] = n;
  }
  return limits;
}

export const maxThresholds = 10;
export const defaultThresholdsPct: readonly number[] = [defaultThresholdPct, 100];

/**
 * The alert thresholds of PUT …/alert-webhook, ascending: `thresholds_pct` (1..10 distinct whole
 * percents 1..100; an empty array is refused, not read as none), or `threshold_pct` alone (that
 * one and 100), not both; neither is [80, 100].
 */
export function parseThresholds(thresholdsPct: Value | undefined, thresholdPct: number | undefined, field = 'thresholds_pct'): number[] {
  if (thresholdsPct === undefined) return thresholdPct === undefined ? [...defaultThresholdsPct] : [...new Set([parseThresholdPct(thresholdPct), 100])];
  if (thresholdPct !== undefined) throw invalidArgument(field, `Send ${field} or threshold_pct, not both.`);
  if (thresholdsPct.kind.case !== 'listValue') throw invalidArgument(field, `${field} must be an array of whole percents, not ${describe(thresholdsPct)}.`);
  const items = thresholdsPct.kind.value.values;
  if (items.length === 0 || items.length > maxThresholds)
    throw invalidArgument(field, `${field} must hold 1 to ${maxThresholds} percents (leave it out for the default, 80 and 100).`);
  const percents: number[] = [];
  items.forEach((item, i) => {
    const pct = parseThresholdPct(item.kind.case === 'numberValue' ? item.kind.value : Number.NaN, `${field}[${i}]`);
    if (percents.includes(pct)) throw invalidArgument(`${field}[${i}]`, `${field}[${i}] repeats ${pct}.`);
    percents.push(pct);
  });
  return percents.sort((a, b) => a - b);
}

export const defaultGracePeriodSeconds = 86_400;
export const maxGracePeriodSeconds = 7 * 86_400;

/** `grace_period_seconds` of a rotation: a whole number from 0 to 604800; absent or null: 86400. */
export function parseGracePeriod(value: Value | undefined, field = 'grace_period_seconds'): number {
  if (value === undefined || value.kind.case === 'nullValue') return defaultGracePeriodSeconds;
  const n = value.kind.case === 'numberValue' ? value.kind.value : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n > maxGracePeriodSeconds)
    throw invalidArgument(field, `${field} must be a whole number of seconds from 0 to ${maxGracePeriodSeconds} (7 days).`);
  return n;
}
