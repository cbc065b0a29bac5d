import {
  type DescField,
  type DescMessage,
  fromJson,
  getOption,
  hasOption,
  type JsonObject,
  type JsonValue,
  type Message,
  ScalarType,
  toJson,
} from '@bufbuild/protobuf';
import { field as fieldRule } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { type Route, readsFromQuery } from './routes.js';

/** A request input the client must fix: a 400 naming the field. */
export class InputError extends Error {
  constructor(
    readonly field: string | null,
    message: string,
  ) {
    super(message);
  }
}

const int32Types = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32, ScalarType.UINT32, ScalarType.FIXED32]);
const int64Types = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);
const wrapperScalar: Record<string, 'string' | 'boolean' | 'number'> = {
  'google.protobuf.StringValue': 'string',
  'google.protobuf.BoolValue': 'boolean',
  'google.protobuf.DoubleValue': 'number',
  'google.protobuf.FloatValue': 'number',
  'google.protobuf.Int32Value': 'number',
  'google.protobuf.Int64Value': 'number',
  'google.protobuf.UInt32Value': 'number',
  'google.protobuf.UInt64Value': 'number',
};

const unsigned32Types = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const inInt32Range = (scalar: ScalarType, value: number) =>
  unsigned32Types.has(scalar) ? value >= 0 && value <= 2 ** 32 - 1 : value >= -(2 ** 31) && value <= 2 ** 31 - 1;
const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);
const describe = (value: unknown) =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;

/**
 * The request message of a route from its path variables, query string and JSON body, with
 * a 400 naming the field for any value of the wrong type. Unknown fields are ignored.
 */
export function decodeRequest(route: Route, pathValues: Map<DescField, string>, query: URLSearchParams, body: JsonValue | undefined): Message {
  const desc = route.method.input;
  const input: JsonObject = {};
  if (route.body === '*') {
    if (body !== undefined && !isObject(body)) throw new InputError(null, `The request body must be a JSON object, not ${describe(body)}.`);
    Object.assign(input, body ?? {});
  } else if (route.body && body !== undefined) {
    input[route.body] = body;
  }
  for (const field of desc.fields) {
    if (pathValues.has(field) || field.name in input || field.jsonName in input) continue;
    // On a body route, only fields marked from_query may come from the query string.
    if (route.body === '*' && !readsFromQuery(field)) continue;
    const values = query.getAll(field.name);
    if (values.length > 0) input[field.name] = queryValue(field, values);
  }
  for (const [field, value] of pathValues) {
    input[field.name] = field.fieldKind === 'scalar' && field.scalar !== ScalarType.STRING ? queryValue(field, [value]) : value;
  }
  const checked = checkMessage(desc, input, '');
  try {
    return fromJson(desc, checked, { ignoreUnknownFields: true });
  } catch (err) {
    throw new InputError(null, `The request could not be read: ${(err as Error).message}`);
  }
}

function queryValue(field: DescField, values: string[]): JsonValue {
  if (field.fieldKind === 'list') return values.map((value) => scalarFromText(field, field.listKind === 'scalar' ? field.scalar : ScalarType.STRING, value));
  if (field.fieldKind === 'scalar') return scalarFromText(field, field.scalar, values[values.length - 1]);
  if (field.fieldKind === 'enum') return values[values.length - 1];
  throw new InputError(field.name, `${field.name} cannot be given as a query parameter.`);
}

function scalarFromText(field: DescField, scalar: ScalarType, text: string): JsonValue {
  if (int32Types.has(scalar) || int64Types.has(scalar)) {
    if (!/^-?\d+$/.test(text)) throw new InputError(field.name, `${field.name} must be an integer.`);
    return int32Types.has(scalar) ? Number(text) : text;
  }
  if (scalar === ScalarType.BOOL) {
    if (text !== 'true' && text !== 'false') throw new InputError(field.name, `${field.name} must be true or false.`);
    return text === 'true';
  }
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT) {
    if (!/^-?\d+(\.\d+)?$/.test(text)) throw new InputError(field.name, `${field.name} must be a number.`);
    return Number(text);
  }
  return text;
}

/**
 * Drops unknown fields and nulls, and checks every JSON type against the message. A null for a
 * `google.protobuf.Value` field is kept: it is that Value's null (an input that "null clears",
 * such as the auto top-up's `low_balance_threshold_usd`), told apart from a field left out.
 */
function checkMessage(desc: DescMessage, value: JsonObject, prefix: string): JsonObject {
  const out: JsonObject = {};
  for (const [key, item] of Object.entries(value)) {
    const field = desc.fields.find((f) => f.name === key || f.jsonName === key);
    if (field?.fieldKind === 'message' && field.message.typeName === 'google.protobuf.Value' && item === null) out[field.name] = null;
    if (!field || item === null) continue;
    const path = prefix ? `${prefix}.${field.name}` : field.name;
    out[field.name] = checkField(field, item, path);
  }
  return out;
}

function checkField(field: DescField, value: JsonValue, path: string): JsonValue {
  switch (field.fieldKind) {
    case 'scalar':
      return checkScalar(field.scalar, value, path);
    case 'enum':
      if (typeof value !== 'string' && !Number.isInteger(value)) throw new InputError(path, `${path} must be a string.`);
      return value;
    case 'message':
      return checkMessageValue(field.message, value, path);
    case 'list': {
      if (!Array.isArray(value)) throw new InputError(path, `${path} must be an array, not ${describe(value)}.`);
      return value.map((item, index) => {
        const itemPath = `${path}[${index}]`;
        if (item === null) throw new InputError(itemPath, `${itemPath} must not be null.`);
        if (field.listKind === 'scalar') return checkScalar(field.scalar, item, itemPath);
        if (field.listKind === 'message') return checkMessageValue(field.message, item, itemPath);
        return item;
      });
    }
    case 'map': {
      if (!isObject(value)) throw new InputError(path, `${path} must be an object, not ${describe(value)}.`);
      const out: JsonObject = {};
      for (const [key, item] of Object.entries(value)) {
        const itemPath = `${path}.${key}`;
        if (item === null) throw new InputError(itemPath, `${itemPath} must not be null.`);
        out[key] =
          field.mapKind === 'scalar'
            ? checkScalar(field.scalar, item, itemPath)
            : field.mapKind === 'message'
              ? checkMessageValue(field.message, item, itemPath)
              : item;
      }
      return out;
    }
  }
}

function checkMessageValue(desc: DescMessage, value: JsonValue, path: string): JsonValue {
  switch (desc.typeName) {
    case 'google.protobuf.Value':
      return value;
    case 'google.protobuf.Struct':
      if (!isObject(value)) throw new InputError(path, `${path} must be a JSON object, not ${describe(value)}.`);
      return value;
    case 'google.protobuf.ListValue':
      if (!Array.isArray(value)) throw new InputError(path, `${path} must be an array, not ${describe(value)}.`);
      return value;
    case 'google.protobuf.Timestamp':
      if (typeof value !== 'string' || Number.isNaN(Date.parse(value))) throw new InputError(path, `${path} must be an RFC 3339 timestamp string.`);
      return value;
    case 'google.protobuf.Duration':
      if (typeof value !== 'string') throw new InputError(path, `${path} must be a duration string such as "30s".`);
      return value;
  }
  const wrapped = wrapperScalar[desc.typeName];
  if (wrapped) {
    if (typeof value !== wrapped) throw new InputError(path, `${path} must be a ${wrapped}, not ${describe(value)}.`);
    return value;
  }
  if (!isObject(value)) throw new InputError(path, `${path} must be an object, not ${describe(value)}.`);
  return checkMessage(desc, value, path);
}

function checkScalar(scalar: ScalarType, value: JsonValue, path: string): JsonValue {
  if (scalar === ScalarType.STRING) {
    if (typeof value !== 'string') throw new InputError(path, `${path} must be a string, not ${describe(value)}.`);
    // No text of the API may hold one, and Postgres cannot store it.
    if (value.includes('\u0000')) throw new InputError(path, `${path} must not contain a NUL character.`);
    return value;
  }
  if (scalar === ScalarType.BOOL) {
    if (typeof value !== 'boolean') throw new InputError(path, `${path} must be true or false, not ${describe(value)}.`);
    return value;
  }
  if (int32Types.has(scalar) || int64Types.has(scalar)) {
    // 64-bit integers may come as strings (proto3 JSON: beyond 2^53 a number loses digits);
    // 32-bit ones are JSON numbers only, so "1" is a type error like any other.
    const integer = typeof value === 'number' ? Number.isInteger(value) : int64Types.has(scalar) && typeof value === 'string' && /^-?\d+$/.test(value);
    if (!integer) throw new InputError(path, `${path} must be an integer, not ${describe(value)}.`);
    if (int32Types.has(scalar) && !inInt32Range(scalar, Number(value))) throw new InputError(path, `${path} is out of range.`);
    return value;
  }
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT) {
    if (typeof value !== 'number') throw new InputError(path, `${path} must be a number, not ${describe(value)}.`);
    return value;
  }
  if (typeof value !== 'string') throw new InputError(path, `${path} must be a base64 string.`);
  return value;
}

interface FieldPlan {
  name: string;
  omitIfUnset: boolean;
  /** The JSON of an implicit-presence string left at its default (""): unset, for omit_if_unset. */
  implicitDefault?: JsonValue;
  /** What an absent field becomes. */
  empty: () => JsonValue;
  /** Converts a present value (int64 strings to numbers, nested records). */
  convert?: (value: JsonValue) => JsonValue;
}

const plans = new WeakMap<DescMessage, FieldPlan[]>();

/**
 * The public JSON of a response message: proto field names, every field present (null when
 * unset, [] and {} for empty lists and maps), int64 as numbers, omit_if_unset fields absent (an
 * implicit-presence string is unset when empty).
 */
export function encodeResponse(desc: DescMessage, message: Message): JsonValue {
  return complete(desc, toJson(desc, message, { useProtoFieldName: true, alwaysEmitImplicit: true }) as JsonObject);
}

function complete(desc: DescMessage, json: JsonObject): JsonObject {
  for (const plan of planOf(desc)) {
    const value = json[plan.name];
    if (plan.omitIfUnset && value !== undefined && value === plan.implicitDefault) {
      delete json[plan.name];
    } else if (value === undefined) {
      if (!plan.omitIfUnset) json[plan.name] = plan.empty();
    } else if (plan.convert) {
      json[plan.name] = plan.convert(value);
    }
  }
  return json;
}

const isWellKnown = (desc: DescMessage) => desc.typeName.startsWith('google.protobuf.') || desc.typeName.startsWith('google.api.');

function planOf(desc: DescMessage): FieldPlan[] {
  let plan = plans.get(desc);
  if (plan) return plan;
  plan = desc.fields.map((field): FieldPlan => {
    const omitIfUnset = hasOption(field, fieldRule) && getOption(field, fieldRule).omitIfUnset;
    const base = { name: field.name, omitIfUnset };
    const convertOne = (kind: 'scalar' | 'message' | 'enum', scalar?: ScalarType, message?: DescMessage): ((value: JsonValue) => JsonValue) | undefined => {
      if (kind === 'scalar' && scalar !== undefined && int64Types.has(scalar)) return (value: JsonValue) => Number(value);
      if (kind === 'message' && message && !isWellKnown(message)) return (value: JsonValue) => complete(message, value as JsonObject);
      return undefined;
    };
    switch (field.fieldKind) {
      case 'list': {
        const one = convertOne(
          field.listKind,
          field.listKind === 'scalar' ? field.scalar : undefined,
          field.listKind === 'message' ? field.message : undefined,
        );
        return { ...base, empty: () => [], convert: one && ((value) => (value as JsonValue[]).map(one)) };
      }
      case 'map': {
        const one = convertOne(field.mapKind, field.mapKind === 'scalar' ? field.scalar : undefined, field.mapKind === 'message' ? field.message : undefined);
        return {
          ...base,
          empty: () => ({}),
          convert: one && ((value) => Object.fromEntries(Object.entries(value as JsonObject).map(([k, v]) => [k, one(v)]))),
        };
      }
      case 'scalar': {
        const implicit = field.scalar === ScalarType.STRING && !field.proto.proto3Optional && field.oneof === undefined;
        return { ...base, implicitDefault: implicit ? '' : undefined, empty: () => null, convert: convertOne('scalar', field.scalar) };
      }
      case 'message':
        return {
          ...base,
          empty: () => (field.message.typeName === 'google.protobuf.Struct' ? {} : null),
          convert: convertOne('message', undefined, field.message),
        };
      default:
        return { ...base, empty: () => null };
    }
  });
  plans.set(desc, plan);
  return plan;
}
