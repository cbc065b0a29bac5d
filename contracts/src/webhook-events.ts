import { type DescField, type DescMessage, getOption, type JsonObject, ScalarType } from '@bufbuild/protobuf';
import { comments } from './gen/comments.js';
import {
  AgentCompletedSchema,
  AutoTopupFailedSchema,
  AutoTopupUpdatedSchema,
  BalanceLowSchema,
  DisputeLostSchema,
  event_type,
  FreeCreditGrantedSchema,
  KeyCreatedSchema,
  KeyExpiredSchema,
  KeyRevokedSchema,
  KeyRotatedSchema,
  OrganizationMemberAddedSchema,
  OrganizationMemberRemovedSchema,
  PaymentMethodRemovedSchema,
  PaymentMethodSavedSchema,
  RefundRecordedSchema,
  SpendAlertSchema,
  TopupCompletedSchema,
  WebhookDeliveryExhaustedSchema,
  WebhookEndpointDisabledSchema,
  WebhookEndpointRecoveredSchema,
  WebhookTestSchema,
} from './gen/switchboard/events/v1/events_pb.js';

/**
 * The event catalog of the webhooks (docs/webhooks.md#event-types): the event types an endpoint
 * can subscribe to, each with when it is sent, a JSON Schema (2020-12) of its delivery body and an
 * example body. It is part of the contract: the webhooks service serves it
 * (`GET /v1/webhook-event-types`), the gateway lists it in the OpenAPI document's `webhooks`, and
 * the tests validate every delivery against it.
 *
 * The schemas are derived from the payload messages of events.proto when first asked for (the
 * descriptors are compiled in; the field descriptions are the protos' comments, which
 * protoc-gen-comments keeps), so they cannot drift from the messages. They describe the JSON form
 * the runtime writes (runtime/src/event-data.ts, docs/events.md "How events are typed"): proto
 * field names, every field present, an unset optional field or message null, 64-bit integers as
 * decimal strings, timestamps with three fractional digits (more only for a finer time).
 */

/** One subscribable event type, as defined here. */
interface Definition {
  /** The payload message (its `event_type` option is the type). */
  message: DescMessage;
  /** When it is sent, in one sentence. */
  description: string;
  /** Fields of the message left out of the delivered data. */
  omitted?: readonly string[];
  /** The data of the example body. */
  example: JsonObject;
}

const definitions: readonly Definition[] = [
  {
    message: AgentCompletedSchema,
    description: 'An agent runtime reported a completed run; the data is the JSON object it published, as is.',
    example: { run_id: 'run_8431', agent: 'support-triage', status: 'succeeded', output: { summary: 'Refund issued for order 1042.' } },
  },
  {
    message: WebhookTestSchema,
    description: 'The test call of an endpoint; sent only to the endpoint tested, whatever it subscribes to.',
    example: { webhook_id: 'wh_R0XBoqnTtHmNd087CGgIwA', workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', message: 'This is a test delivery from Switchboard.' },
  },
  {
    message: SpendAlertSchema,
    description:
      "A key's spend first reached one of its alert thresholds of one of its budgets (once per threshold and period); sent only to the key's alert URL, signed with the key's own signing secret.",
    omitted: ['alert_url'],
    example: {
      key_id: 'key_2cQp8VwXn3LrT6yZbD1fGh',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      month: '2026-11',
      threshold_pct: 80,
      spend_usd: '40.12',
      cap_usd: '50.00',
      period: 'month',
      period_start: '2026-11-01',
    },
  },
  {
    message: KeyCreatedSchema,
    description: 'A key was created (never the full key).',
    example: {
      key_id: 'key_2cQp8VwXn3LrT6yZbD1fGh',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      name: 'Production backend',
      hint: 'sb_…a1b2',
      created_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD',
      monthly_spend_cap_usd: '50.00',
      routing_policy: 'balanced',
    },
  },
  {
    message: KeyRevokedSchema,
    description: 'A key was revoked, by a person or automatically.',
    example: { key_id: 'key_2cQp8VwXn3LrT6yZbD1fGh', workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', revoked_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD', reason: 'revoked' },
  },
  {
    message: KeyRotatedSchema,
    description: 'A key was rotated: a new key replaces it, and the old one works until previous_expires_at.',
    example: {
      key_id: 'key_7HwTq2MbXc4NzR8sLp1VdE',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      previous_key_id: 'key_2cQp8VwXn3LrT6yZbD1fGh',
      previous_expires_at: '2026-11-21T08:00:00.000Z',
      rotated_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD',
    },
  },
  {
    message: KeyExpiredSchema,
    description: "A key's expires_at passed (once per key).",
    example: { key_id: 'key_2cQp8VwXn3LrT6yZbD1fGh', workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', expired_at: '2026-11-20T08:00:00.000Z' },
  },
  {
    message: TopupCompletedSchema,
    description: 'A payment was credited (exactly once): a checkout, or an auto top-up charge.',
    example: {
      checkout_id: 'chk_9LmN3bVc5XzQ1wErT7yUiO',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      amount_usd: '25.00',
      balance_usd: '31.75',
      provider: 'stripe',
      completed_at: '2026-11-20T08:00:00.000Z',
      balance_version: '42',
      trigger: 'manual',
    },
  },
  {
    message: FreeCreditGrantedSchema,
    description: "The free credit was granted to a user's personal workspace (email verified; once per user).",
    example: { workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', user_id: 'usr_5NfK2pLq9RtVw3XyZa7BcD', amount_usd: '5.00', balance_usd: '5.00' },
  },
  {
    message: PaymentMethodSavedSchema,
    description: 'A card was saved for the workspace.',
    example: { workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', payment_method_id: 'pm_4FgH6jK8lZ2xC4vB6nM8qW', brand: 'visa', last4: '4242' },
  },
  {
    message: PaymentMethodRemovedSchema,
    description: 'A saved card was removed.',
    example: { workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', payment_method_id: 'pm_4FgH6jK8lZ2xC4vB6nM8qW', removed_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD' },
  },
  {
    message: AutoTopupUpdatedSchema,
    description: 'The auto top-up settings changed, by a user or by the service.',
    example: {
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      enabled: true,
      threshold_usd: '5.00',
      amount_usd: '20.00',
      monthly_limit_usd: '100.00',
      low_balance_threshold_usd: null,
      reason: 'settings',
      updated_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD',
    },
  },
  {
    message: AutoTopupFailedSchema,
    description: 'An auto top-up charge failed (after 3 in a row auto top-up is switched off).',
    example: {
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      charge_id: 'atp_3RtY5uI7oP9aS1dF3gH5jK',
      amount_usd: '20.00',
      reason: 'card_declined',
      consecutive_failures: 1,
      disabled: false,
      failed_at: '2026-11-20T08:00:00.000Z',
    },
  },
  {
    message: BalanceLowSchema,
    description: "A debit took the balance below the workspace's low_balance_threshold_usd (once per crossing).",
    example: { workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj', balance_usd: '4.98', threshold_usd: '5.00', balance_version: '57' },
  },
  {
    message: RefundRecordedSchema,
    description: 'A payment was refunded at the provider and the amount debited.',
    example: {
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      provider_charge_id: 'ch_3PqR5sT7uV9wX1yZ3aB5cD',
      topup_id: 'chk_9LmN3bVc5XzQ1wErT7yUiO',
      amount_usd: '10.00',
      balance_usd: '21.75',
    },
  },
  {
    message: DisputeLostSchema,
    description: "A payment's dispute was lost and the amount debited.",
    example: {
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      dispute_id: 'dp_1MnB3vC5xZ7lK9jH1gF3dS',
      provider_charge_id: 'ch_3PqR5sT7uV9wX1yZ3aB5cD',
      amount_usd: '25.00',
      balance_usd: '-3.25',
    },
  },
  {
    message: OrganizationMemberAddedSchema,
    description: 'Someone joined the organization.',
    example: { org_id: 'org_cglK8wFk6Fgek3RtLKE3pj', user_id: 'usr_8XcV2bN4mQ6wE8rT0yU2iO', role: 'developer', invitation_id: 'inv_6TgB8nH0jM2kL4pO6iU8yT' },
  },
  {
    message: OrganizationMemberRemovedSchema,
    description: 'A member left or was removed (their keys there are revoked).',
    example: { org_id: 'org_cglK8wFk6Fgek3RtLKE3pj', user_id: 'usr_8XcV2bN4mQ6wE8rT0yU2iO', removed_by: 'usr_5NfK2pLq9RtVw3XyZa7BcD' },
  },
  {
    message: WebhookEndpointDisabledSchema,
    description: 'Another endpoint of the workspace was disabled by the service (it answered 410, or failed for 5 days).',
    example: {
      webhook_id: 'wh_Y4uI6oP8aS0dF2gH4jK6lZ',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      url: 'https://old.example.com/hooks',
      reason: 'failing',
      disabled_at: '2026-11-20T08:00:00.000Z',
      failing_since: '2026-11-15T07:59:12.418Z',
    },
  },
  {
    message: WebhookDeliveryExhaustedSchema,
    description: 'A delivery to another endpoint of the workspace used its last retry without a success.',
    example: {
      webhook_id: 'wh_Y4uI6oP8aS0dF2gH4jK6lZ',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      delivery_id: 'dlv_2wE4rT6yU8iO0pA2sD4fG6',
      event_id: 'evt_5hWJjYyHcVQ2rBkqXn1Zt0',
      event_type: 'key.created',
      exhausted_at: '2026-11-20T08:00:00.000Z',
    },
  },
  {
    message: WebhookEndpointRecoveredSchema,
    description: 'Another endpoint of the workspace succeeded again after failures that lasted at least an hour.',
    example: {
      webhook_id: 'wh_Y4uI6oP8aS0dF2gH4jK6lZ',
      workspace_id: 'org_cglK8wFk6Fgek3RtLKE3pj',
      url: 'https://old.example.com/hooks',
      failing_since: '2026-11-20T05:12:40.007Z',
      recovered_at: '2026-11-20T08:00:00.000Z',
    },
  },
];

/** The payload messages of the event types an endpoint can subscribe to, in the catalog's order. */
export const webhookEventMessages: readonly DescMessage[] = definitions.map((definition) => definition.message);

/** One entry of the catalog, as `GET /v1/webhook-event-types` answers it. */
export interface WebhookEventType {
  type: string;
  description: string;
  /** A JSON Schema (2020-12) of the whole delivery body. */
  schema: JsonObject;
  /** A delivery body of this type. */
  example: JsonObject;
}

let catalog: readonly WebhookEventType[] | undefined;

/** Every subscribable event type with its description, schema and example. */
export function webhookEventCatalog(): readonly WebhookEventType[] {
  catalog ??= definitions.map((definition) => {
    const type = getOption(definition.message, event_type);
    return {
      type,
      description: definition.description,
      schema: deliveryBodySchema(type, definition),
      example: {
        id: 'evt_5hWJjYyHcVQ2rBkqXn1Zt0',
        type,
        timestamp: '2026-11-20T08:00:00.000Z',
        data: definition.example,
      },
    };
  });
  return catalog;
}

/** The catalog entry of a type, if an endpoint can subscribe to it. */
export function webhookEventType(type: string): WebhookEventType | undefined {
  return webhookEventCatalog().find((entry) => entry.type === type);
}

const timestampPattern = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}';

function deliveryBodySchema(type: string, definition: Definition): JsonObject {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: type,
    description: definition.description,
    type: 'object',
    properties: {
      id: {
        type: 'string',
        pattern: '^evt_[A-Za-z0-9_-]{1,100}$',
        description: "The event's id (evt_…): the same in every delivery of this event, to every endpoint.",
      },
      type: { const: type, description: 'The event type.' },
      timestamp: {
        type: 'string',
        format: 'date-time',
        // The envelope's occurred_at in its proto3 JSON form: 0, 3, 6 or 9 fractional digits.
        pattern: `${timestampPattern}(\\.[0-9]{3}([0-9]{3}){0,2})?Z$`,
        description: 'When the event happened (RFC 3339, UTC).',
      },
      data: dataSchema(definition.message, new Set(definition.omitted)),
    },
    required: ['id', 'type', 'timestamp', 'data'],
    additionalProperties: false,
  };
}

/**
 * The data: the payload message's JSON form, or any JSON object for a message without fields.
 * The message's own comment is not its description: it names the type and notes for the
 * contract's readers (the catalog's sentence describes the type).
 */
function dataSchema(message: DescMessage, omitted: ReadonlySet<string>): JsonObject {
  if (message.fields.length === 0) return { type: 'object', description: 'Any JSON object: what the producer published, as is.' };
  const description = `The JSON form of ${message.typeName} (events.proto).`;
  const properties: JsonObject = {};
  const required: string[] = [];
  for (const field of message.fields) {
    if (omitted.has(field.name)) continue;
    const schema = fieldSchema(field);
    const comment = comments[`${message.typeName}.${field.name}`];
    properties[field.name] = comment ? { ...schema, description: comment } : schema;
    required.push(field.name);
  }
  return { type: 'object', description, properties, required, additionalProperties: false };
}

function fieldSchema(field: DescField): JsonObject {
  switch (field.fieldKind) {
    case 'scalar': {
      const schema = scalarSchema(field.scalar, field.name);
      return field.proto.proto3Optional || field.oneof !== undefined ? nullable(schema) : schema;
    }
    case 'enum':
      return { type: 'string', enum: field.enum.values.map((value) => value.name) };
    case 'message':
      // An unset message is null, whatever the message.
      return nullable(messageSchema(field.message));
    case 'list':
      return {
        type: 'array',
        items:
          field.listKind === 'scalar'
            ? scalarSchema(field.scalar, field.name)
            : field.listKind === 'enum'
              ? { type: 'string', enum: field.enum.values.map((value) => value.name) }
              : messageSchema(field.message),
      };
    case 'map':
      return {
        type: 'object',
        additionalProperties:
          field.mapKind === 'scalar'
            ? scalarSchema(field.scalar, field.name)
            : field.mapKind === 'enum'
              ? { type: 'string', enum: field.enum.values.map((value) => value.name) }
              : messageSchema(field.message),
      };
  }
}

function messageSchema(message: DescMessage): JsonObject {
  switch (message.typeName) {
    case 'google.protobuf.Timestamp':
      // Written like Date.toISOString(): three fractional digits, six or nine only for a finer time.
      return { type: 'string', format: 'date-time', pattern: `${timestampPattern}\\.[0-9]{3}([0-9]{3}){0,2}Z$` };
    case 'google.protobuf.Struct':
      return { type: 'object' };
    case 'google.protobuf.Value':
      return {};
    default:
      return dataSchema(message, new Set());
  }
}

/** Money (a string field named `…_usd`) is a decimal string (docs/conventions.md#money); so is a 64-bit integer here. */
function scalarSchema(scalar: ScalarType, name: string): JsonObject {
  switch (scalar) {
    case ScalarType.STRING:
      return /_usd$/.test(name) ? { type: 'string', pattern: '^-?[0-9]+(\\.[0-9]+)?$' } : { type: 'string' };
    case ScalarType.BYTES:
      return { type: 'string', contentEncoding: 'base64' };
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: 'number' };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: 'integer', minimum: -2147483648, maximum: 2147483647 };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: 'integer', minimum: 0, maximum: 4294967295 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: 'string', pattern: '^[0-9]+$' };
    default:
      // INT64, SINT64, SFIXED64: decimal strings in events (docs/events.md).
      return { type: 'string', pattern: '^-?[0-9]+$' };
  }
}

function nullable(schema: JsonObject): JsonObject {
  const type = schema.type;
  if (typeof type === 'string') return { ...schema, type: [type, 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}
