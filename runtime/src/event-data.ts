import { create, type DescMessage, fromJson, getOption, type JsonObject, type MessageInitShape, type MessageShape, toJson } from '@bufbuild/protobuf';
import { type Timestamp, TimestampSchema, timestampDate } from '@bufbuild/protobuf/wkt';
import { event_type } from '@switchboard/contracts/switchboard/events/v1/events_pb';

/**
 * The data of an event is a payload message of events.proto, whose `event_type` option names
 * its type: producers and consumers pass the message's schema, never the type string, and the
 * data travels as the message's JSON form (docs/events.md, "How events are typed").
 */

/** The fields of a message (the metadata keys of protobuf-es left out). */
type FieldsOf<Desc extends DescMessage> = Exclude<keyof MessageShape<Desc>, '$typeName' | '$unknown'>;

/**
 * What a producer gives as data: the message or its init object; any JSON object when the
 * payload message has no fields (a free-form event: agent.completed).
 */
export type EventData<Desc extends DescMessage> = [FieldsOf<Desc>] extends [never] ? JsonObject : MessageInitShape<Desc>;

const types = new WeakMap<DescMessage, string>();

/** The event type a payload message names; throws for a message that is not an event payload. */
export function eventTypeOf(schema: DescMessage): string {
  let type = types.get(schema);
  if (type === undefined) {
    type = getOption(schema, event_type);
    if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(type)) throw new Error(`${schema.typeName} has no valid event_type option`);
    types.set(schema, type);
  }
  return type;
}

/** A payload message without fields: its data is any JSON object, passed through as is. */
function isFreeForm(schema: DescMessage): boolean {
  return schema.fields.length === 0;
}

/**
 * The JSON form of an event's data: proto field names, every field present. Before events were
 * typed, producers wrote these objects by hand, and the wire keeps their form: an unset optional
 * field or message is null (protobuf JSON would leave it out) and a timestamp is written like
 * `Date.toISOString()`, three fractional digits even for a whole second.
 */
export function eventDataToJson<Desc extends DescMessage>(schema: Desc, data: EventData<Desc>): JsonObject {
  if (isFreeForm(schema)) return data as JsonObject;
  const message = create(schema, data as MessageInitShape<Desc>);
  const json = toJson(schema, message, { useProtoFieldName: true, alwaysEmitImplicit: true }) as JsonObject;
  const result: JsonObject = {};
  for (const field of schema.fields) {
    const value = json[field.name];
    if (value === undefined) result[field.name] = null;
    else if (field.fieldKind === 'message' && field.message.typeName === TimestampSchema.typeName) {
      const timestamp = (message as Record<string, unknown>)[field.localName] as Timestamp;
      result[field.name] = timestamp.nanos % 1_000_000 === 0 ? timestampDate(timestamp).toISOString() : value;
    } else result[field.name] = value;
  }
  return result;
}

/**
 * An event's data decoded into its payload message; fields it does not know are ignored (a newer
 * producer may add some). Throws when the data does not fit the message.
 */
export function eventDataFromJson<Desc extends DescMessage>(schema: Desc, json: JsonObject): MessageShape<Desc> {
  return fromJson(schema, json, { ignoreUnknownFields: true });
}
