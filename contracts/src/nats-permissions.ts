import { type DescMessage, getOption } from '@bufbuild/protobuf';
import type { ComponentName } from './components.js';
import {
  AgentCompletedSchema,
  AuditRecordedSchema,
  AutoTopupFailedSchema,
  AutoTopupUpdatedSchema,
  BalanceChangedSchema,
  BalanceLowSchema,
  DisputeLostSchema,
  event_type,
  FeedbackRecordedSchema,
  FreeCreditGrantedSchema,
  KeyCreatedSchema,
  KeyExpiredSchema,
  KeyRevokedSchema,
  KeyRotatedSchema,
  KeyUpdatedSchema,
  OrganizationCreatedSchema,
  OrganizationDeletedSchema,
  OrganizationMemberAddedSchema,
  OrganizationMemberRemovedSchema,
  OrganizationMemberRoleChangedSchema,
  PaymentMethodRemovedSchema,
  PaymentMethodSavedSchema,
  RefundRecordedSchema,
  SessionRevokedSchema,
  SpendAlertSchema,
  TopupCompletedSchema,
  UsageRecordedSchema,
  UserDeactivatedSchema,
  UserEmailVerifiedSchema,
  UserRegisteredSchema,
  WebhookDeliveryExhaustedSchema,
  WebhookEndpointDisabledSchema,
  WebhookEndpointRecoveredSchema,
  WebhookTestSchema,
} from './gen/switchboard/events/v1/events_pb.js';
import { webhookEventMessages } from './webhook-events.js';

/**
 * What each component does on NATS, as data (docs/operations.md#nats-credentials): the event
 * types it publishes, the ones it consumes through a durable JetStream consumer or a plain
 * subscription, the work subjects it publishes or consumes (docs/money-path.md#usage) and the
 * streams it creates. The credentials generator turns it into one NATS user per component whose
 * permissions allow exactly that; the consumers are named from it (eventDurable, workDurable), so
 * a consumer the table does not list is refused by the server, never silently allowed.
 */
export interface NatsRole {
  /** Event types published on `<events prefix>.<type>` (its outbox relay, or the gateway's audit publisher). */
  produces: readonly string[];
  /** Event types consumed by a durable consumer of the event stream each, named eventDurable(component, type). */
  consumes: readonly string[];
  /** Event subjects (after `<events prefix>.`, `>` allowed) subscribed to without JetStream: hints, not records. */
  listens: readonly string[];
  /** Work subjects published (the data plane's usage and exchanges). */
  producesWork: readonly WorkSubject[];
  /** Work subjects consumed by a durable consumer each, named workDurable(component, subject). */
  consumesWork: readonly WorkSubject[];
  /** Creates the event stream if missing (every service does, before its outbox relays). */
  createsEventStream: boolean;
  /** Reads the last message of a work subject (billing's read-your-writes barrier, docs/money-path.md#usage). */
  readsWork: readonly WorkSubject[];
  /** Keeps the Idempotency-Key answers in the namespace's KV bucket (docs/conventions.md#idempotency). */
  idempotencyBucket: boolean;
}

/** The subjects of the work stream: `workSubjects` in runtime/src/nats.ts names them. */
export type WorkSubject = 'usage' | 'exchanges';

const typeOf = (schema: DescMessage): string => getOption(schema, event_type);
const typesOf = (...schemas: DescMessage[]): string[] => schemas.map(typeOf);

/** Every service writes audit records through its outbox; the gateway publishes its own. */
const audit = typeOf(AuditRecordedSchema);

const none: Pick<NatsRole, 'consumes' | 'listens' | 'producesWork' | 'consumesWork' | 'readsWork'> = {
  consumes: [],
  listens: [],
  producesWork: [],
  consumesWork: [],
  readsWork: [],
};

/** The events the webhooks service fans out (all of the catalog but the spend alert and the test event, which go to one URL). */
const fannedOut = webhookEventMessages.filter((schema) => schema !== SpendAlertSchema && schema !== WebhookTestSchema);

export const natsRoles: Readonly<Record<ComponentName, NatsRole>> = {
  identity: {
    ...none,
    produces: [
      ...typesOf(
        UserRegisteredSchema,
        SessionRevokedSchema,
        UserEmailVerifiedSchema,
        UserDeactivatedSchema,
        OrganizationCreatedSchema,
        OrganizationMemberAddedSchema,
        OrganizationMemberRemovedSchema,
        OrganizationMemberRoleChangedSchema,
        OrganizationDeletedSchema,
      ),
      audit,
    ],
    // The audit log (docs/api/identity.md#audit-log).
    consumes: [audit],
    createsEventStream: true,
    idempotencyBucket: false,
  },
  keys: {
    ...none,
    produces: [...typesOf(KeyCreatedSchema, KeyRevokedSchema, KeyUpdatedSchema, KeyRotatedSchema, KeyExpiredSchema, SpendAlertSchema), audit],
    consumes: typesOf(UsageRecordedSchema, BalanceChangedSchema, UserDeactivatedSchema, OrganizationMemberRemovedSchema, OrganizationDeletedSchema),
    createsEventStream: true,
    idempotencyBucket: false,
  },
  billing: {
    ...none,
    produces: [
      ...typesOf(
        UsageRecordedSchema,
        TopupCompletedSchema,
        BalanceChangedSchema,
        FreeCreditGrantedSchema,
        PaymentMethodSavedSchema,
        PaymentMethodRemovedSchema,
        AutoTopupUpdatedSchema,
        AutoTopupFailedSchema,
        BalanceLowSchema,
        RefundRecordedSchema,
        DisputeLostSchema,
      ),
      audit,
    ],
    consumes: typesOf(FeedbackRecordedSchema, UserEmailVerifiedSchema),
    consumesWork: ['usage'],
    readsWork: ['usage'],
    createsEventStream: true,
    idempotencyBucket: false,
  },
  conversations: {
    ...none,
    produces: [typeOf(FeedbackRecordedSchema), audit],
    consumes: typesOf(UsageRecordedSchema),
    consumesWork: ['exchanges'],
    createsEventStream: true,
    idempotencyBucket: false,
  },
  webhooks: {
    ...none,
    // agent.completed: PublishEvent's (docs/api/internal-calls.md#publishevent).
    produces: [...typesOf(AgentCompletedSchema, WebhookEndpointDisabledSchema, WebhookEndpointRecoveredSchema, WebhookDeliveryExhaustedSchema), audit],
    consumes: [...fannedOut.map(typeOf), ...typesOf(SpendAlertSchema, OrganizationDeletedSchema)],
    createsEventStream: true,
    idempotencyBucket: false,
  },
  // Revocations and key nudges are hints (the polls are the backstop): plain subscriptions.
  'data-plane': { ...none, produces: [], listens: ['key.>'], producesWork: ['usage', 'exchanges'], createsEventStream: false, idempotencyBucket: false },
  gateway: {
    ...none,
    produces: [audit],
    listens: [typeOf(SessionRevokedSchema), 'organization.>', ...typesOf(KeyRevokedSchema, KeyUpdatedSchema)],
    createsEventStream: false,
    idempotencyBucket: true,
  },
};

/**
 * An external agent runtime may publish `agent.completed` itself (docs/api/internal-calls.md#publishevent):
 * the generator's optional `agent` user may publish that subject and nothing else.
 */
export const agentProduces: readonly string[] = [typeOf(AgentCompletedSchema)];

/** The durable consumer of `component` for the events of `type` (one per type: NATS 2.9 has no multi-filter consumers). */
export function eventDurable(component: string, type: string): string {
  return `${component}-${type.replaceAll('.', '-')}`;
}

/** The durable consumer of `component` for a work subject (e.g. `billing-usage`). */
export function workDurable(component: string, subject: WorkSubject): string {
  return `${component}-${subject}`;
}

/** The inbox prefix of a component's connection: replies reach only it, and its permissions can say so. */
export function natsInboxPrefix(component: string): string {
  return `_INBOX_${component}`;
}

/** The JetStream KV bucket of the Idempotency-Key answers of a namespace (docs/conventions.md#idempotency). */
export function idempotencyBucketOf(namespace: string): string {
  return `${namespace}-idempotency`;
}

/** The NATS names of one deployment (runtime/src/config.ts readEventsConfig gives them for a namespace). */
export interface NatsNames {
  eventsSubjectPrefix: string;
  eventsStream: string;
  workStream: string;
  /** The subject of each work subject (runtime/src/nats.ts workSubjects). */
  workSubjects: Readonly<Record<WorkSubject, string>>;
  idempotencyBucket: string;
}

export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

/** The JetStream API subjects a durable consumer needs: create/update, look up, pull, acknowledge. */
function consumerSubjects(stream: string, durable: string): string[] {
  const api = '$JS.API.CONSUMER';
  return [
    `${api}.CREATE.${stream}.${durable}`,
    // nats.js names the filter subject in the create subject when there is one (NATS 2.9+).
    `${api}.CREATE.${stream}.${durable}.>`,
    `${api}.DURABLE.CREATE.${stream}.${durable}`,
    `${api}.INFO.${stream}.${durable}`,
    `${api}.MSG.NEXT.${stream}.${durable}`,
    `$JS.ACK.${stream}.${durable}.>`,
  ];
}

function streamSubjects(stream: string): string[] {
  return [`$JS.API.STREAM.INFO.${stream}`, `$JS.API.STREAM.CREATE.${stream}`];
}

/** What the NATS user of `component` may publish and subscribe to, in a deployment named by `names`. */
export function natsPermissionsOf(component: ComponentName, names: NatsNames): NatsPermissions {
  const role = natsRoles[component];
  const event = (type: string) => `${names.eventsSubjectPrefix}.${type}`;
  const publish = new Set<string>(['$JS.API.INFO', ...role.produces.map(event)]);
  const subscribe = new Set<string>([`${natsInboxPrefix(component)}.>`, ...role.listens.map(event)]);
  if (role.createsEventStream) for (const subject of streamSubjects(names.eventsStream)) publish.add(subject);
  if (role.producesWork.length > 0 || role.consumesWork.length > 0) for (const subject of streamSubjects(names.workStream)) publish.add(subject);
  for (const subject of role.producesWork) publish.add(names.workSubjects[subject]);
  for (const type of role.consumes) for (const subject of consumerSubjects(names.eventsStream, eventDurable(component, type))) publish.add(subject);
  for (const subject of role.consumesWork) for (const api of consumerSubjects(names.workStream, workDurable(component, subject))) publish.add(api);
  if (role.readsWork.length > 0) publish.add(`$JS.API.STREAM.MSG.GET.${names.workStream}`);
  if (role.idempotencyBucket) {
    const stream = `KV_${names.idempotencyBucket}`;
    for (const subject of [
      ...streamSubjects(stream),
      `$JS.API.STREAM.UPDATE.${stream}`,
      `$JS.API.STREAM.MSG.GET.${stream}`,
      `$JS.API.DIRECT.GET.${stream}`,
      `$JS.API.DIRECT.GET.${stream}.>`,
      `$KV.${names.idempotencyBucket}.>`,
    ])
      publish.add(subject);
  }
  return { publish: [...publish], subscribe: [...subscribe] };
}

/** The permissions of the optional `agent` user: agent.completed, and replies on its own inbox. */
export function agentNatsPermissions(names: NatsNames): NatsPermissions {
  return { publish: ['$JS.API.INFO', ...agentProduces.map((type) => `${names.eventsSubjectPrefix}.${type}`)], subscribe: [`${natsInboxPrefix('agent')}.>`] };
}
