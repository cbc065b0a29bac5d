import { invalidArgument } from '@switchboard/runtime/errors';

// Checks of the fields the data plane sends (usage, leases): a bad one is a 400 naming it.

const maxIdLength = 200;

export function requiredId(value: string, field: string): string {
  if (value.trim() === '') throw invalidArgument(field, `${field} is required.`);
  if (value.length > maxIdLength) throw invalidArgument(field, `${field} may be at most ${maxIdLength} characters.`);
  return value;
}

/** An optional id: absent when empty. */
export function optionalId(value: string | undefined, field: string): string | undefined {
  return value === undefined || value === '' ? undefined : requiredId(value, field);
}

export function tokenCount(value: bigint, field: string): bigint {
  if (value < 0n) throw invalidArgument(field, `${field} must be a whole number of tokens, 0 or more.`);
  return value;
}
