import type { DescEnum } from '@bufbuild/protobuf';

/**
 * A proto enum carried as a string field, for wire values older than the enum (e.g. AuthorizeKey's
 * `reason`, docs/decisions.md "Refusal reasons"): the value's name without the enum's prefix, in
 * lower case (KEY_REFUSAL_SPEND_CAP_EXCEEDED is "spend_cap_exceeded"), and "" for the zero value.
 * proto3 JSON would print the full name and gRPC a number, which callers of the string field
 * cannot read.
 */
export function enumToWire(desc: DescEnum, value: number): string {
  if (value === 0) return '';
  const known = desc.value[value];
  if (!known) throw new Error(`${desc.typeName} has no value ${value}`);
  return known.localName.toLowerCase();
}

/** The enum value of a wire string (see enumToWire); undefined for a string it does not know. */
export function enumFromWire(desc: DescEnum, wire: string): number | undefined {
  if (wire === '') return 0;
  return desc.values.find((v) => v.number !== 0 && v.localName.toLowerCase() === wire)?.number;
}
