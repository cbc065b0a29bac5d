import { invalidArgument } from '@switchboard/runtime/errors';
import { type RoutingPolicy, routingPolicies } from '@switchboard/runtime/model-catalog';
import { parsePlainDecimal } from '@switchboard/runtime/money';

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
