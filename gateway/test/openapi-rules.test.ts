import { create, createFileRegistry, type DescMessage, type MessageInitShape, setExtension } from '@bufbuild/protobuf';
import {
  type FieldDescriptorProtoSchema,
  FieldOptionsSchema,
  FileDescriptorProtoSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from '@bufbuild/protobuf/wkt';
import { FieldRulesSchema, Ignore, field as validateRules } from '@switchboard/contracts/buf/validate/validate_pb';
import { describe, expect, it } from 'vitest';
import { Schemas } from '../src/openapi/schemas.js';

/**
 * How each protovalidate rule reads in the document (gateway/src/openapi/rules.ts), on a message
 * made here with one field per rule, so every mapping is pinned whatever the protos use today.
 */

type Rules = MessageInitShape<typeof FieldRulesSchema>;

interface FieldSpec {
  name: string;
  type: Type;
  repeated?: boolean;
  rules?: Rules;
  /** A map<string, int32> field (its entry message is made too). */
  map?: boolean;
}

function messageOf(fields: FieldSpec[]): DescMessage {
  const protos = fields.map((spec, i): MessageInitShape<typeof FieldDescriptorProtoSchema> => {
    const options = create(FieldOptionsSchema);
    if (spec.rules) setExtension(options, validateRules, create(FieldRulesSchema, spec.rules));
    return {
      name: spec.name,
      number: i + 1,
      jsonName: spec.name,
      type: spec.map ? Type.MESSAGE : spec.type,
      typeName: spec.map ? `.t.M.${spec.name[0].toUpperCase()}${spec.name.slice(1)}Entry` : undefined,
      label: spec.repeated || spec.map ? Label.REPEATED : Label.OPTIONAL,
      options,
    };
  });
  const entries = fields
    .filter((spec) => spec.map)
    .map((spec) => ({
      name: `${spec.name[0].toUpperCase()}${spec.name.slice(1)}Entry`,
      options: { mapEntry: true },
      field: [
        { name: 'key', number: 1, jsonName: 'key', type: Type.STRING, label: Label.OPTIONAL },
        { name: 'value', number: 2, jsonName: 'value', type: spec.type, label: Label.OPTIONAL },
      ],
    }));
  const file = create(FileDescriptorProtoSchema, {
    name: 't.proto',
    package: 't',
    syntax: 'proto3',
    messageType: [{ name: 'M', field: protos, nestedType: entries }],
  });
  return createFileRegistry(file, () => undefined).getMessage('t.M')!;
}

/** The properties of the message's request schema. */
function inputSchema(fields: FieldSpec[]): { properties: Record<string, unknown>; required?: string[] } {
  const schemas = new Schemas();
  const ref = schemas.input(messageOf(fields), []) as { $ref: string };
  return schemas.components.get(ref.$ref.split('/').pop()!) as { properties: Record<string, unknown>; required?: string[] };
}

describe('protovalidate rules in the document', () => {
  it('maps string rules to enum, lengths, pattern and format', () => {
    const { properties } = inputSchema([
      { name: 'role', type: Type.STRING, rules: { type: { case: 'string', value: { in: ['admin', 'developer'] } } } },
      { name: 'name', type: Type.STRING, rules: { type: { case: 'string', value: { minLen: 1n, maxLen: 100n } } } },
      { name: 'code', type: Type.STRING, rules: { type: { case: 'string', value: { len: 6n, pattern: '^[0-9]+$' } } } },
      { name: 'id', type: Type.STRING, rules: { type: { case: 'string', value: { prefix: 'key_', suffix: '.x' } } } },
      { name: 'email', type: Type.STRING, rules: { type: { case: 'string', value: { wellKnown: { case: 'email', value: true }, maxBytes: 320n } } } },
      { name: 'not', type: Type.STRING, rules: { type: { case: 'string', value: { notIn: ['owner'], const: 'x' } } } },
    ]);
    expect(properties.role).toEqual({ type: 'string', enum: ['admin', 'developer'] });
    expect(properties.name).toEqual({ type: 'string', minLength: 1, maxLength: 100 });
    expect(properties.code).toEqual({ type: 'string', minLength: 6, maxLength: 6, pattern: '^[0-9]+$' });
    expect(properties.id).toEqual({ type: 'string', allOf: [{ pattern: '^key_' }, { pattern: '\\.x$' }] });
    // No JSON Schema keyword counts bytes: said in words.
    expect(properties.email).toEqual({ type: 'string', format: 'email', description: 'At most 320 bytes of UTF-8.' });
    expect(properties.not).toEqual({ type: 'string', const: 'x', not: { enum: ['owner'] } });
  });

  it('maps numeric bounds, exclusive ones and ranges outside', () => {
    const { properties } = inputSchema([
      {
        name: 'days',
        type: Type.INT32,
        rules: { type: { case: 'int32', value: { greaterThan: { case: 'gte', value: 1 }, lessThan: { case: 'lte', value: 365 } } } },
      },
      {
        name: 'big',
        type: Type.INT64,
        rules: { type: { case: 'int64', value: { greaterThan: { case: 'gt', value: 0n }, lessThan: { case: 'lt', value: 10n } } } },
      },
      { name: 'rating', type: Type.INT32, rules: { type: { case: 'int32', value: { in: [1, -1] } } } },
      {
        name: 'outside',
        type: Type.DOUBLE,
        rules: { type: { case: 'double', value: { greaterThan: { case: 'gt', value: 10 }, lessThan: { case: 'lt', value: 0 } } } },
      },
    ]);
    expect(properties.days).toEqual({ type: 'integer', format: 'int32', minimum: 1, maximum: 365 });
    expect(properties.big).toEqual({ type: 'integer', format: 'int64', exclusiveMinimum: 0, exclusiveMaximum: 10 });
    expect(properties.rating).toEqual({ type: 'integer', format: 'int32', enum: [1, -1] });
    expect(properties.outside).toEqual({ type: 'number', format: 'double', anyOf: [{ exclusiveMaximum: 0 }, { exclusiveMinimum: 10 }] });
  });

  it('maps list and map rules, with the rules of their items and values', () => {
    const { properties } = inputSchema([
      {
        name: 'scopes',
        type: Type.STRING,
        repeated: true,
        rules: {
          type: {
            case: 'repeated',
            value: { minItems: 1n, maxItems: 3n, unique: true, items: { type: { case: 'string', value: { in: ['read', 'manage'] } } } },
          },
        },
      },
      {
        name: 'limits',
        type: Type.INT32,
        map: true,
        rules: { type: { case: 'map', value: { maxPairs: 3n, values: { type: { case: 'int32', value: { greaterThan: { case: 'gte', value: 1 } } } } } } },
      },
    ]);
    expect(properties.scopes).toEqual({ type: 'array', items: { type: 'string', enum: ['read', 'manage'] }, minItems: 1, maxItems: 3, uniqueItems: true });
    expect(properties.limits).toEqual({ type: 'object', additionalProperties: { type: 'integer', format: 'int32', minimum: 1 }, maxProperties: 3 });
  });

  it('marks `required` fields and skips rules that are ignored', () => {
    const schema = inputSchema([
      { name: 'must', type: Type.STRING, rules: { required: true } },
      { name: 'never', type: Type.STRING, rules: { ignore: Ignore.ALWAYS, type: { case: 'string', value: { minLen: 5n } } } },
      { name: 'free', type: Type.STRING },
    ]);
    expect(schema.required).toEqual(['must']);
    expect(schema.properties.never).toEqual({ type: 'string' });
    expect(schema.properties.free).toEqual({ type: 'string' });
  });
});
