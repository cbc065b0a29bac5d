import type { Schemas } from '@switchboard/sdk';

/**
 * The closed sets of the API reference (its enums, from the protos' input rules:
 * docs/conventions.md#input-rules), for the values the forms send: a form field holds a string,
 * always one of its options, which list the same sets.
 */
export type KeyScope = Schemas['switchboard.keys.v1.Key']['scopes'][number];
export type RoutingPolicy = Schemas['switchboard.keys.v1.Key']['routing_policy'];
export type KeyStatus = Schemas['switchboard.keys.v1.Key']['status'];
export type GrantableRole = Schemas['switchboard.identity.v1.CreateInvitationRequest']['role'];
export type DeliveryStatus = Schemas['switchboard.webhooks.v1.Delivery']['status'];
export type EventType = NonNullable<Schemas['switchboard.webhooks.v1.CreateWebhookRequest']['events']>[number];
export type AuditAction = Schemas['switchboard.identity.v1.AuditEvent']['action'];
