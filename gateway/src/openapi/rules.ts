import { type DescEnum, type DescField, type DescMessage, getOption, hasOption, isFieldSet, type Message } from '@bufbuild/protobuf';
import {
  type FieldRules,
  FieldRulesSchema,
  Ignore,
  type StringRules,
  StringRulesSchema,
  field as validateRules,
} from '@switchboard/contracts/buf/validate/validate_pb';
import type { Json } from './json-schema.js';

/**
 * The JSON Schema keywords of a field's protovalidate rules (`(buf.validate.field)`): the same
 * annotations the services validate requests with, so the document states every closed set as an
 * `enum` and every limit as a keyword (docs/conventions.md#limits). A rule JSON Schema cannot say
 * (a byte length) is written in words instead; CEL expressions are not translated.
 */

/** A field's rules, when it has any that apply (`ignore: IGNORE_ALWAYS` turns them off). */
export function rulesOf(field: DescField): FieldRules | undefined {
  if (!hasOption(field, validateRules)) return undefined;
  const rules = getOption(field, validateRules);
  return rules.ignore === Ignore.ALWAYS ? undefined : rules;
}

/** `(buf.validate.field).required`: the service refuses a request without the field. */
export function requiredByRules(field: DescField): boolean {
  return rulesOf(field)?.required ?? false;
}

/** What a field's rules add to its schema: keywords, and sentences for what no keyword says. */
export interface Constraints {
  keywords: Json;
  notes: string[];
}

const none = (): Constraints => ({ keywords: {}, notes: [] });

/**
 * The constraints of a field's value: for a list or a map the container's (minItems, …) with
 * its items' or values' own under `items` / `additionalProperties`, which the caller merges
 * into the schema it built for them.
 */
export function constraintsOf(field: DescField): Constraints {
  const rules = rulesOf(field);
  if (!rules) return none();
  const enumDesc = field.fieldKind === 'enum' || (field.fieldKind === 'list' && field.listKind === 'enum') ? field.enum : undefined;
  return valueConstraints(rules, enumDesc);
}

/** Merges constraints into a schema (nested `items` / `additionalProperties` keywords included). */
export function constrained(schema: Json, { keywords }: Constraints): Json {
  const out: Json = { ...schema };
  for (const [key, value] of Object.entries(keywords)) {
    const own = out[key];
    if ((key === 'items' || key === 'additionalProperties') && own && typeof own === 'object' && value && typeof value === 'object') {
      // A referenced message stays a $ref; its rules sit beside it (JSON Schema 2020-12 allows both).
      out[key] = { ...(own as Json), ...(value as Json) };
    } else {
      out[key] = value;
    }
  }
  return out;
}

function valueConstraints(rules: FieldRules, enumDesc: DescEnum | undefined): Constraints {
  const { type } = rules;
  switch (type.case) {
    case undefined:
      return none();
    case 'string':
      return stringConstraints(type.value);
    case 'float':
    case 'double':
    case 'int32':
    case 'int64':
    case 'uint32':
    case 'uint64':
    case 'sint32':
    case 'sint64':
    case 'fixed32':
    case 'fixed64':
    case 'sfixed32':
    case 'sfixed64':
      return numberConstraints(type.value, rulesMessage(type.case));
    case 'bool':
      return { keywords: isFieldSet(type.value, rulesMessage('bool').field.const) ? { const: type.value.const } : {}, notes: [] };
    case 'enum': {
      const r = type.value;
      const name = (n: number) => enumDesc?.values.find((v) => v.number === n)?.name;
      const keywords: Json = {};
      if (r.in.length > 0) keywords.enum = r.in.map(name).filter(Boolean);
      if (r.notIn.length > 0) keywords.not = { enum: r.notIn.map(name).filter(Boolean) };
      if (isFieldSet(r, rulesMessage('enum').field.const)) keywords.const = name(r.const);
      return { keywords, notes: [] };
    }
    case 'repeated': {
      const r = type.value;
      const desc = rulesMessage('repeated');
      const constraints = none();
      if (isFieldSet(r, desc.field.minItems)) constraints.keywords.minItems = Number(r.minItems);
      if (isFieldSet(r, desc.field.maxItems)) constraints.keywords.maxItems = Number(r.maxItems);
      if (r.unique) constraints.keywords.uniqueItems = true;
      addNested(constraints, 'items', r.items, enumDesc, 'Each item');
      return constraints;
    }
    case 'map': {
      const r = type.value;
      const desc = rulesMessage('map');
      const constraints = none();
      if (isFieldSet(r, desc.field.minPairs)) constraints.keywords.minProperties = Number(r.minPairs);
      if (isFieldSet(r, desc.field.maxPairs)) constraints.keywords.maxProperties = Number(r.maxPairs);
      addNested(constraints, 'propertyNames', r.keys, undefined);
      addNested(constraints, 'additionalProperties', r.values, enumDesc, 'Each value');
      return constraints;
    }
    default:
      // bytes, durations, timestamps, Any, field masks: no rule of ours uses them on the REST surface.
      return none();
  }
}

/**
 * Adds the rules of a repeated field's items or a map's keys or values under `keyword` and, with
 * a `notePrefix`, their notes after it; rules marked IGNORE_ALWAYS add nothing.
 */
function addNested(into: Constraints, keyword: string, rules: FieldRules | undefined, enumDesc: DescEnum | undefined, notePrefix?: string): void {
  if (!rules || rules.ignore === Ignore.ALWAYS) return;
  const nested = valueConstraints(rules, enumDesc);
  if (Object.keys(nested.keywords).length > 0) into.keywords[keyword] = nested.keywords;
  if (notePrefix) into.notes.push(...nested.notes.map((n) => `${notePrefix}: ${n}`));
}

/** The message of one kind of rules (buf.validate.Int32Rules for `int32`), to ask which of its fields are set. */
function rulesMessage(kind: keyof typeof FieldRulesSchema.field): DescMessage {
  const field = FieldRulesSchema.field[kind];
  if (field?.fieldKind !== 'message') throw new Error(`buf.validate.FieldRules has no rules named ${kind}`);
  return field.message;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** JSON Schema formats of protovalidate's well-known string rules (those JSON Schema names). */
const formats: Partial<Record<NonNullable<StringRules['wellKnown']['case']>, string>> = {
  email: 'email',
  hostname: 'hostname',
  ipv4: 'ipv4',
  ipv6: 'ipv6',
  uri: 'uri',
  uriRef: 'uri-reference',
  uuid: 'uuid',
};

function stringConstraints(r: StringRules): Constraints {
  const f = StringRulesSchema.field;
  const keywords: Json = {};
  const notes: string[] = [];
  if (isFieldSet(r, f.const)) keywords.const = r.const;
  if (isFieldSet(r, f.len)) {
    keywords.minLength = Number(r.len);
    keywords.maxLength = Number(r.len);
  }
  if (isFieldSet(r, f.minLen)) keywords.minLength = Number(r.minLen);
  if (isFieldSet(r, f.maxLen)) keywords.maxLength = Number(r.maxLen);
  const patterns: string[] = [];
  if (isFieldSet(r, f.pattern)) patterns.push(r.pattern);
  if (isFieldSet(r, f.prefix)) patterns.push(`^${escapeRegExp(r.prefix)}`);
  if (isFieldSet(r, f.suffix)) patterns.push(`${escapeRegExp(r.suffix)}$`);
  if (isFieldSet(r, f.contains)) patterns.push(escapeRegExp(r.contains));
  if (patterns.length === 1) keywords.pattern = patterns[0];
  else if (patterns.length > 1) keywords.allOf = patterns.map((pattern) => ({ pattern }));
  if (r.in.length > 0) keywords.enum = [...r.in];
  if (r.notIn.length > 0) keywords.not = { enum: [...r.notIn] };
  const format = r.wellKnown.case && r.wellKnown.value === true ? formats[r.wellKnown.case] : undefined;
  if (format) keywords.format = format;
  if (r.example.length > 0) keywords.examples = [...r.example];
  // JSON Schema counts code points only; a byte limit is said in words.
  const bytes = (n: bigint) => `${n} byte${n === 1n ? '' : 's'}`;
  if (isFieldSet(r, f.lenBytes)) notes.push(`Exactly ${bytes(r.lenBytes)} of UTF-8.`);
  if (isFieldSet(r, f.minBytes)) notes.push(`At least ${bytes(r.minBytes)} of UTF-8.`);
  if (isFieldSet(r, f.maxBytes)) notes.push(`At most ${bytes(r.maxBytes)} of UTF-8.`);
  return { keywords, notes };
}

/** The rules every numeric type shares: const, lt/lte, gt/gte, in, not_in. */
interface NumberRules {
  const: number | bigint;
  lessThan: { case: 'lt' | 'lte'; value: number | bigint } | { case: undefined; value?: undefined };
  greaterThan: { case: 'gt' | 'gte'; value: number | bigint } | { case: undefined; value?: undefined };
  in: Array<number | bigint>;
  notIn: Array<number | bigint>;
}

function numberConstraints(rules: Message, desc: DescMessage): Constraints {
  const r = rules as unknown as NumberRules;
  const keywords: Json = {};
  const constField = desc.fields.find((x) => x.name === 'const');
  if (constField && isFieldSet(rules, constField)) keywords.const = Number(r.const);
  const upper: Json =
    r.lessThan.case === 'lt' ? { exclusiveMaximum: Number(r.lessThan.value) } : r.lessThan.case === 'lte' ? { maximum: Number(r.lessThan.value) } : {};
  const lower: Json =
    r.greaterThan.case === 'gt'
      ? { exclusiveMinimum: Number(r.greaterThan.value) }
      : r.greaterThan.case === 'gte'
        ? { minimum: Number(r.greaterThan.value) }
        : {};
  // protovalidate reads a lower bound above the upper one as "outside the range".
  if (r.lessThan.case && r.greaterThan.case && Number(r.greaterThan.value) > Number(r.lessThan.value)) keywords.anyOf = [upper, lower];
  else Object.assign(keywords, upper, lower);
  if (r.in.length > 0) keywords.enum = r.in.map(Number);
  if (r.notIn.length > 0) keywords.not = { enum: r.notIn.map(Number) };
  return { keywords, notes: [] };
}
