import { type DescField, type DescMessage, getOption, hasOption, ScalarType } from '@bufbuild/protobuf';
import { comments } from '@switchboard/contracts/comments';
import { FieldBehavior, field_behavior as fieldBehavior } from '@switchboard/contracts/google/api/field_behavior_pb';
import { field as fieldRule, message as messageRule } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { ERROR_SCHEMA, errorSchema } from './errors.js';
import { enumSchema, HTTP_BODY, type Json, nullable, scalarSchema, wellKnownSchema } from './json-schema.js';
import { constrained, constraintsOf, requiredByRules } from './rules.js';

/**
 * components.schemas: one JSON Schema per proto message and direction, described by the proto's
 * comments and examples, nullable exactly where the gateway writes null.
 */

/** A field with explicit presence: proto3 `optional`, or a member of a oneof. */
function hasExplicitPresence(field: DescField): boolean {
  return (field.fieldKind === 'scalar' || field.fieldKind === 'enum') && (field.proto.proto3Optional || field.oneof !== undefined);
}

function omitIfUnset(field: DescField): boolean {
  return hasOption(field, fieldRule) && getOption(field, fieldRule).omitIfUnset;
}

function alwaysSet(field: DescField): boolean {
  return hasOption(field, fieldRule) && getOption(field, fieldRule).alwaysSet;
}

type Mode = 'output' | 'input';

/** Builds components.schemas: one schema per proto message (and mode) used. */
export class Schemas {
  readonly components = new Map<string, Json>();
  private readonly names = new Map<string, string>();

  /** A $ref to the schema of a message as a request body (path-bound fields left out). */
  input(message: DescMessage, excluded: string[]): Json {
    return this.ref(message, 'input', excluded);
  }

  /** The schema of a message-typed value: well-known types inline, others by reference. */
  message(message: DescMessage, mode: Mode): Json {
    return wellKnownSchema(message) ?? this.ref(message, mode, []);
  }

  private ref(message: DescMessage, mode: Mode, excluded: string[]): Json {
    const known = wellKnownSchema(message);
    if (known) return known;
    const key = `${message.typeName}|${mode}|${[...excluded].sort().join(',')}`;
    let name = this.names.get(key);
    if (!name) {
      name = this.freeName(message.typeName, mode);
      this.names.set(key, name);
      this.components.set(name, {}); // placeholder: recursive messages refer to it
      this.components.set(name, this.build(message, mode, new Set(excluded)));
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** Output schemas take the type name (they are built first); other variants get a suffix. */
  private freeName(typeName: string, mode: Mode): string {
    if (!this.components.has(typeName)) return typeName;
    const suffix = mode === 'input' ? 'Input' : 'Output';
    for (let i = 1; ; i++) {
      const candidate = `${typeName}.${suffix}${i === 1 ? '' : i}`;
      if (!this.components.has(candidate)) return candidate;
    }
  }

  private build(message: DescMessage, mode: Mode, excluded: Set<string>): Json {
    const properties: Record<string, Json> = {};
    const required: string[] = [];
    for (const field of message.fields) {
      if (excluded.has(field.name)) continue;
      // A response's raw body (e.g. a report's `csv`) is sent instead of the JSON, never in it (operations.ts rawBodiesOf).
      if (mode === 'output' && field.fieldKind === 'message' && field.message.typeName === HTTP_BODY) continue;
      properties[field.name] = described(this.field(field, mode), fieldDescription(field));
      if (mode === 'output' ? !omitIfUnset(field) : isRequired(field)) required.push(field.name);
    }
    const schema: Json = { type: 'object', title: message.name };
    const description = comments[message.typeName];
    if (description) schema.description = description;
    schema.properties = properties;
    if (required.length > 0) schema.required = required;
    const example = exampleOf(message, excluded);
    if (example) schema.examples = [example];
    return schema;
  }

  /** The schema of one field's JSON value, with the limits of its protovalidate rules (openapi/rules.ts). */
  field(field: DescField, mode: Mode): Json {
    // In responses, unset fields are null, except omit_if_unset ones, which are absent, and
    // always_set ones, which never are unset. In requests a field is simply left out (the
    // gateway reads null as absent, never as "clear").
    const mayBeNull = mode === 'output' && !omitIfUnset(field) && !alwaysSet(field);
    const constraints = constraintsOf(field);
    let schema: Json;
    switch (field.fieldKind) {
      case 'scalar':
        schema = constrained(withHints(field, scalarSchema(field.scalar)), constraints);
        return hasExplicitPresence(field) && mayBeNull ? nullable(schema) : schema;
      case 'enum':
        schema = constrained(enumSchema(field.enum), constraints);
        return hasExplicitPresence(field) && mayBeNull ? nullable(schema) : schema;
      case 'message':
        // A google.protobuf.Value states what it accepts itself: it cannot carry protovalidate rules.
        schema = declaredSchema(field) ?? constrained(withHints(field, this.message(field.message, mode)), constraints);
        // An unset Struct is written as {} (never null); other unset messages as null.
        if (mode === 'output' && field.message.typeName === 'google.protobuf.Struct') return schema;
        return mayBeNull ? nullable(schema) : schema;
      case 'list': {
        const items =
          field.listKind === 'scalar' ? scalarSchema(field.scalar) : field.listKind === 'enum' ? enumSchema(field.enum) : this.message(field.message, mode);
        return constrained({ type: 'array', items }, constraints);
      }
      case 'map': {
        const values =
          field.mapKind === 'scalar' ? scalarSchema(field.scalar) : field.mapKind === 'enum' ? enumSchema(field.enum) : this.message(field.message, mode);
        return constrained({ type: 'object', additionalProperties: values }, constraints);
      }
    }
  }

  /** components.schemas, sorted by name, with the shared error body and the given schemas that are not protos. */
  sorted(others: Record<string, Json> = {}): Record<string, Json> {
    const all = new Map(this.components);
    all.set(ERROR_SCHEMA, errorSchema());
    for (const [name, schema] of Object.entries(others)) {
      if (all.has(name)) throw new Error(`OpenAPI: two schemas named ${name}`);
      all.set(name, schema);
    }
    return Object.fromEntries([...all.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

/**
 * The JSON Schema a google.protobuf.Value or ListValue field says it accepts
 * (`(switchboard.api.v1.field).schema`, docs/conventions.md#input-rules), or undefined.
 */
function declaredSchema(field: DescField): Json | undefined {
  const text = hasOption(field, fieldRule) ? getOption(field, fieldRule).schema : '';
  if (!text) return undefined;
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (err) {
    throw new Error(`${field.parent.typeName}.${field.name}: its schema is not JSON (${(err as Error).message})`);
  }
  if (!schema || typeof schema !== 'object' || Array.isArray(schema))
    throw new Error(`${field.parent.typeName}.${field.name}: its schema is not a JSON object`);
  return schema as Json;
}

/**
 * A field marked `(google.api.field_behavior) = REQUIRED` or `(buf.validate.field).required`: the
 * service refuses a request without it.
 */
export function isRequired(field: DescField): boolean {
  return (hasOption(field, fieldBehavior) && getOption(field, fieldBehavior).includes(FieldBehavior.REQUIRED)) || requiredByRules(field);
}

/**
 * The example of a message's JSON form, from its `(switchboard.api.v1.message).example` option,
 * without the fields bound elsewhere (path variables). A malformed example fails the build of the
 * document, so at start-up.
 */
export function exampleOf(message: DescMessage, excluded: Iterable<string> = []): Json | undefined {
  if (message.typeName === 'google.protobuf.Empty') return {};
  if (!hasOption(message, messageRule)) return undefined;
  const text = getOption(message, messageRule).example;
  if (!text) return undefined;
  let example: unknown;
  try {
    example = JSON.parse(text);
  } catch (err) {
    throw new Error(`${message.typeName}: its example is not JSON (${(err as Error).message})`);
  }
  if (!example || typeof example !== 'object' || Array.isArray(example)) throw new Error(`${message.typeName}: its example is not a JSON object`);
  const out = { ...(example as Json) };
  for (const name of excluded) delete out[name];
  return out;
}

/** A field's description: its comment, and for an enum what each value means. */
function fieldDescription(field: DescField): string {
  const parts = [comments[`${field.parent.typeName}.${field.name}`] ?? ''];
  const desc = field.fieldKind === 'enum' ? field.enum : field.fieldKind === 'list' && field.listKind === 'enum' ? field.enum : undefined;
  if (desc) {
    const values = desc.values.filter((v) => v.number !== 0 || comments[`${desc.typeName}.${v.name}`]);
    const lines = values.map((v) => `- \`${v.name}\`${comments[`${desc.typeName}.${v.name}`] ? `: ${comments[`${desc.typeName}.${v.name}`]}` : ''}`);
    if (lines.length > 0) parts.push(lines.join('\n'));
  }
  parts.push(...constraintsOf(field).notes);
  return parts.filter(Boolean).join('\n\n');
}

/** A schema with a description in front of the type's own (e.g. "RFC 3339, UTC."). */
function described(schema: Json, description: string): Json {
  if (!description) return schema;
  const own = typeof schema.description === 'string' ? schema.description : '';
  return { ...schema, description: own ? `${description}\n\n${own}` : description };
}

/** Money is a decimal string on this surface (docs/conventions.md#money). */
function withHints(field: DescField, schema: Json): Json {
  if (/_usd$/.test(field.name) && field.fieldKind === 'scalar' && field.scalar === ScalarType.STRING)
    return { ...schema, description: 'Decimal string (USD), e.g. "12.50".' };
  return schema;
}
