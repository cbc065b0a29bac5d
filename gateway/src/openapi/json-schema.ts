import { type DescEnum, type DescMessage, ScalarType } from '@bufbuild/protobuf';

/**
 * The JSON Schemas of proto values on the REST surface: scalars, enums and the well-known types
 * in their proto3 JSON forms (64-bit integers as JSON numbers), and the nullable form of each.
 */

/** A JSON Schema (2020-12) or OpenAPI object. */
export type Json = Record<string, unknown>;

const wrapperTypes: Record<string, Json> = {
  'google.protobuf.DoubleValue': { type: 'number', format: 'double' },
  'google.protobuf.FloatValue': { type: 'number', format: 'float' },
  'google.protobuf.Int64Value': { type: 'integer', format: 'int64' },
  'google.protobuf.UInt64Value': { type: 'integer', format: 'int64', minimum: 0 },
  'google.protobuf.Int32Value': { type: 'integer', format: 'int32' },
  'google.protobuf.UInt32Value': { type: 'integer', minimum: 0, maximum: 4294967295 },
  'google.protobuf.BoolValue': { type: 'boolean' },
  'google.protobuf.StringValue': { type: 'string' },
  'google.protobuf.BytesValue': { type: 'string', contentEncoding: 'base64' },
};

export const HTTP_BODY = 'google.api.HttpBody';

/** The proto3 JSON form of the well-known types (not nullable; callers add null). */
export function wellKnownSchema(message: DescMessage): Json | undefined {
  const wrapper = wrapperTypes[message.typeName];
  if (wrapper) return { ...wrapper };
  switch (message.typeName) {
    case 'google.protobuf.Timestamp':
      return { type: 'string', format: 'date-time', description: 'RFC 3339, UTC.' };
    case 'google.protobuf.Duration':
      return { type: 'string', pattern: '^-?[0-9]+(\\.[0-9]{1,9})?s$', description: 'Seconds with an "s" suffix, e.g. "1.5s".' };
    case 'google.protobuf.Struct':
      return { type: 'object', additionalProperties: true };
    case 'google.protobuf.Value':
      return { description: 'Any JSON value.' };
    case 'google.protobuf.ListValue':
      return { type: 'array', items: {} };
    case 'google.protobuf.Empty':
      return { type: 'object', additionalProperties: false };
    case 'google.protobuf.FieldMask':
      return { type: 'string', description: 'Comma-separated field paths.' };
    case 'google.protobuf.Any':
      return { type: 'object', properties: { '@type': { type: 'string' } }, required: ['@type'], additionalProperties: true };
    case HTTP_BODY:
      return { type: 'string', description: 'Raw content.' };
    default:
      return undefined;
  }
}

export function scalarSchema(scalar: ScalarType): Json {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: 'string' };
    case ScalarType.BYTES:
      return { type: 'string', contentEncoding: 'base64' };
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.DOUBLE:
      return { type: 'number', format: 'double' };
    case ScalarType.FLOAT:
      return { type: 'number', format: 'float' };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: 'integer', format: 'int32' };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: 'integer', minimum: 0, maximum: 4294967295 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: 'integer', format: 'int64', minimum: 0 };
    default:
      // INT64, SINT64, SFIXED64: JSON numbers on this surface.
      return { type: 'integer', format: 'int64' };
  }
}

export function enumSchema(desc: DescEnum): Json {
  if (desc.typeName === 'google.protobuf.NullValue') return { type: 'null' };
  return { type: 'string', enum: desc.values.map((v) => v.name) };
}

/** The schema that also admits null. */
export function nullable(schema: Json): Json {
  if (Object.keys(schema).length === 0 || (Object.keys(schema).length === 1 && 'description' in schema)) return schema; // any
  const type = schema.type;
  if (typeof type === 'string' && !('$ref' in schema)) {
    if (type === 'null') return schema;
    const out: Json = { ...schema, type: [type, 'null'] };
    if (Array.isArray(schema.enum)) out.enum = [...(schema.enum as unknown[]), null];
    return out;
  }
  if (Array.isArray(type)) return type.includes('null') ? schema : { ...schema, type: [...type, 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}
