import { create, type DescMessage, hasOption, type JsonObject, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
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
  file_switchboard_events_v1_events,
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
} from '@switchboard/contracts/switchboard/events/v1/events_pb';
import { webhookEventCatalog, webhookEventType } from '@switchboard/contracts/webhook-events';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { decodeEvent, parseEventEnvelope, type ReceivedEvent } from '../src/consumer.js';
import { type EventData, eventDataFromJson, eventDataToJson, eventTypeOf } from '../src/event-data.js';
import { buildEventPayload } from '../src/outbox.js';

/**
 * Producer and consumer of every event type agree (docs/events.md, "How events are typed"): what
 * a producer builds is written as the JSON below, the form the docs and the webhook receivers
 * know (what producers wrote by hand before events were typed), and a consumer decodes that JSON
 * back into the same message. A renamed proto field changes the JSON and fails here; a renamed
 * TypeScript field fails to compile (the @ts-expect-error lines at the end).
 */

const at = new Date('2025-05-01T09:30:00Z'); // a whole second: still three fractional digits
const later = new Date('2025-05-31T09:30:00.123Z');

interface Case<Desc extends DescMessage> {
  schema: Desc;
  type: string;
  data: EventData<Desc>;
  json: JsonObject;
}

const of = <Desc extends DescMessage>(schema: Desc, type: string, data: EventData<Desc>, json: JsonObject): Case<DescMessage> =>
  ({ schema, type, data, json }) as Case<DescMessage>;

const cases: Case<DescMessage>[] = [
  of(UserRegisteredSchema, 'user.registered', { userId: 'usr_1', personalWorkspaceId: 'org_1' }, { user_id: 'usr_1', personal_workspace_id: 'org_1' }),
  of(
    SessionRevokedSchema,
    'session.revoked',
    { userId: 'usr_1', sessionIds: ['ses_1', 'ses_2'], reason: 'logout' },
    { user_id: 'usr_1', session_ids: ['ses_1', 'ses_2'], reason: 'logout' },
  ),
  of(
    UserDeactivatedSchema,
    'user.deactivated',
    { userId: 'usr_1', deactivatedAt: timestampFromDate(at), eraseAfter: timestampFromDate(later) },
    { user_id: 'usr_1', deactivated_at: '2025-05-01T09:30:00.000Z', erase_after: '2025-05-31T09:30:00.123Z' },
  ),
  of(
    OrganizationCreatedSchema,
    'organization.created',
    { orgId: 'org_1', ownerUserId: 'usr_1', personal: false },
    { org_id: 'org_1', owner_user_id: 'usr_1', personal: false },
  ),
  of(
    OrganizationMemberAddedSchema,
    'organization.member.added',
    { orgId: 'org_1', userId: 'usr_1', role: 'owner' },
    { org_id: 'org_1', user_id: 'usr_1', role: 'owner', invitation_id: null },
  ),
  of(
    OrganizationMemberRemovedSchema,
    'organization.member.removed',
    { orgId: 'org_1', userId: 'usr_2', removedBy: 'usr_1' },
    { org_id: 'org_1', user_id: 'usr_2', removed_by: 'usr_1' },
  ),
  of(
    OrganizationMemberRoleChangedSchema,
    'organization.member.role_changed',
    { orgId: 'org_1', userId: 'usr_2', role: 'admin', previousRole: 'developer' },
    { org_id: 'org_1', user_id: 'usr_2', role: 'admin', previous_role: 'developer' },
  ),
  of(OrganizationDeletedSchema, 'organization.deleted', { orgId: 'org_1' }, { org_id: 'org_1', deleted_by: null }),
  of(
    KeyCreatedSchema,
    'key.created',
    { keyId: 'key_1', workspaceId: 'org_1', name: 'ci', hint: 'sk-…abcd', createdBy: 'usr_1', routingPolicy: 'balanced' },
    { key_id: 'key_1', workspace_id: 'org_1', name: 'ci', hint: 'sk-…abcd', created_by: 'usr_1', monthly_spend_cap_usd: null, routing_policy: 'balanced' },
  ),
  of(
    KeyRevokedSchema,
    'key.revoked',
    { keyId: 'key_1', workspaceId: 'org_1', reason: 'member_removed' },
    { key_id: 'key_1', workspace_id: 'org_1', revoked_by: null, reason: 'member_removed' },
  ),
  of(
    KeyUpdatedSchema,
    'key.updated',
    { keyId: 'key_1', workspaceId: 'org_1', change: 'settings', changedFields: ['expires_at', 'rate_limits'] },
    { key_id: 'key_1', workspace_id: 'org_1', change: 'settings', changed_fields: ['expires_at', 'rate_limits'] },
  ),
  of(
    KeyRotatedSchema,
    'key.rotated',
    { keyId: 'key_2', workspaceId: 'org_1', previousKeyId: 'key_1', previousExpiresAt: timestampFromDate(later), rotatedBy: 'usr_1' },
    { key_id: 'key_2', workspace_id: 'org_1', previous_key_id: 'key_1', previous_expires_at: '2025-05-31T09:30:00.123Z', rotated_by: 'usr_1' },
  ),
  of(
    KeyExpiredSchema,
    'key.expired',
    { keyId: 'key_1', workspaceId: 'org_1', expiredAt: timestampFromDate(at) },
    { key_id: 'key_1', workspace_id: 'org_1', expired_at: '2025-05-01T09:30:00.000Z' },
  ),
  of(
    SpendAlertSchema,
    'key.spend_alert',
    {
      keyId: 'key_1',
      workspaceId: 'org_1',
      month: '2025-05',
      thresholdPct: 80,
      spendUsd: '8.00',
      capUsd: '10.00',
      alertUrl: 'https://example.com/hook',
      period: 'week',
      periodStart: '2025-05-26',
    },
    {
      key_id: 'key_1',
      workspace_id: 'org_1',
      month: '2025-05',
      threshold_pct: 80,
      spend_usd: '8.00',
      cap_usd: '10.00',
      alert_url: 'https://example.com/hook',
      period: 'week',
      period_start: '2025-05-26',
    },
  ),
  of(
    UsageRecordedSchema,
    'billing.usage.recorded',
    {
      usageId: 'usg_1',
      generationId: 'gen_1',
      keyId: 'key_1',
      workspaceId: 'org_1',
      model: 'switchboard/fast',
      routedModel: 'vendor/small',
      tier: 'fast',
      costUsd: '0.00012',
      inputTokens: 1200n,
      outputTokens: 0n,
      occurredAt: timestampFromDate(later),
      balanceUsd: '4.99988',
      balanceVersion: 7n,
    },
    {
      usage_id: 'usg_1',
      generation_id: 'gen_1',
      key_id: 'key_1',
      workspace_id: 'org_1',
      model: 'switchboard/fast',
      routed_model: 'vendor/small',
      tier: 'fast',
      cost_usd: '0.00012',
      input_tokens: '1200',
      output_tokens: '0',
      occurred_at: '2025-05-31T09:30:00.123Z',
      reservation_id: null,
      balance_usd: '4.99988',
      balance_version: '7',
      cap_lease_id: null,
      workspace_lease_id: null,
    },
  ),
  of(
    TopupCompletedSchema,
    'billing.topup.completed',
    {
      checkoutId: 'chk_1',
      workspaceId: 'org_1',
      amountUsd: '10.00',
      balanceUsd: '15.00',
      provider: 'sandbox',
      completedAt: timestampFromDate(at),
      balanceVersion: 3n,
      trigger: 'manual',
    },
    {
      checkout_id: 'chk_1',
      workspace_id: 'org_1',
      amount_usd: '10.00',
      balance_usd: '15.00',
      provider: 'sandbox',
      completed_at: '2025-05-01T09:30:00.000Z',
      balance_version: '3',
      trigger: 'manual',
    },
  ),
  of(
    UserEmailVerifiedSchema,
    'user.email_verified',
    { userId: 'usr_1', personalWorkspaceId: 'org_1', verifiedAt: timestampFromDate(at) },
    { user_id: 'usr_1', personal_workspace_id: 'org_1', verified_at: '2025-05-01T09:30:00.000Z' },
  ),
  of(
    BalanceChangedSchema,
    'billing.balance.changed',
    { workspaceId: 'org_1', entryId: 'led_1', type: 'refund', amountUsd: '-5.00', balanceUsd: '10.00', balanceVersion: 4n, occurredAt: timestampFromDate(at) },
    {
      workspace_id: 'org_1',
      entry_id: 'led_1',
      type: 'refund',
      amount_usd: '-5.00',
      balance_usd: '10.00',
      balance_version: '4',
      occurred_at: '2025-05-01T09:30:00.000Z',
    },
  ),
  of(
    FreeCreditGrantedSchema,
    'billing.free_credit.granted',
    { workspaceId: 'org_1', userId: 'usr_1', amountUsd: '1.00', balanceUsd: '1.00' },
    { workspace_id: 'org_1', user_id: 'usr_1', amount_usd: '1.00', balance_usd: '1.00' },
  ),
  of(
    PaymentMethodSavedSchema,
    'billing.payment_method.saved',
    { workspaceId: 'org_1', paymentMethodId: 'pm_1', brand: 'visa', last4: '4242' },
    { workspace_id: 'org_1', payment_method_id: 'pm_1', brand: 'visa', last4: '4242' },
  ),
  of(
    PaymentMethodRemovedSchema,
    'billing.payment_method.removed',
    { workspaceId: 'org_1', paymentMethodId: 'pm_1' },
    { workspace_id: 'org_1', payment_method_id: 'pm_1', removed_by: null },
  ),
  of(
    AutoTopupUpdatedSchema,
    'billing.auto_topup.updated',
    { workspaceId: 'org_1', enabled: false, thresholdUsd: '5', amountUsd: '20', monthlyLimitUsd: '100', reason: 'charge_failures' },
    {
      workspace_id: 'org_1',
      enabled: false,
      threshold_usd: '5',
      amount_usd: '20',
      monthly_limit_usd: '100',
      low_balance_threshold_usd: null,
      reason: 'charge_failures',
      updated_by: null,
    },
  ),
  of(
    AutoTopupFailedSchema,
    'billing.auto_topup.failed',
    {
      workspaceId: 'org_1',
      chargeId: 'atp_1',
      amountUsd: '20',
      reason: 'card_declined',
      consecutiveFailures: 3,
      disabled: true,
      failedAt: timestampFromDate(at),
    },
    {
      workspace_id: 'org_1',
      charge_id: 'atp_1',
      amount_usd: '20',
      reason: 'card_declined',
      consecutive_failures: 3,
      disabled: true,
      failed_at: '2025-05-01T09:30:00.000Z',
    },
  ),
  of(
    BalanceLowSchema,
    'billing.balance.low',
    { workspaceId: 'org_1', balanceUsd: '4.99', thresholdUsd: '5', balanceVersion: 9n },
    { workspace_id: 'org_1', balance_usd: '4.99', threshold_usd: '5', balance_version: '9' },
  ),
  of(
    RefundRecordedSchema,
    'billing.refund.recorded',
    { workspaceId: 'org_1', providerChargeId: 'ch_1', topupId: 'chk_1', amountUsd: '5.00', balanceUsd: '-1.00' },
    { workspace_id: 'org_1', provider_charge_id: 'ch_1', topup_id: 'chk_1', amount_usd: '5.00', balance_usd: '-1.00' },
  ),
  of(
    DisputeLostSchema,
    'billing.dispute.lost',
    { workspaceId: 'org_1', disputeId: 'dp_1', providerChargeId: 'ch_1', amountUsd: '5.00', balanceUsd: '0' },
    { workspace_id: 'org_1', dispute_id: 'dp_1', provider_charge_id: 'ch_1', amount_usd: '5.00', balance_usd: '0' },
  ),
  of(
    FeedbackRecordedSchema,
    'feedback.recorded',
    { feedbackId: 'fbk_1', generationId: 'gen_1', workspaceId: 'org_1', rating: -1, previousRating: 1, tags: [], tier: 'fast', model: 'vendor/small' },
    { feedback_id: 'fbk_1', generation_id: 'gen_1', workspace_id: 'org_1', rating: -1, previous_rating: 1, tags: [], tier: 'fast', model: 'vendor/small' },
  ),
  of(AgentCompletedSchema, 'agent.completed', { run_id: 'run_1', output: { ok: true, n: [1, null] } }, { run_id: 'run_1', output: { ok: true, n: [1, null] } }),
  of(
    WebhookEndpointDisabledSchema,
    'webhook.endpoint.disabled',
    { webhookId: 'wh_1', workspaceId: 'org_1', url: 'https://example.com/hook', reason: 'endpoint_gone', disabledAt: timestampFromDate(later) },
    {
      webhook_id: 'wh_1',
      workspace_id: 'org_1',
      url: 'https://example.com/hook',
      reason: 'endpoint_gone',
      disabled_at: '2025-05-31T09:30:00.123Z',
      failing_since: null,
    },
  ),
  of(
    AuditRecordedSchema,
    'audit.recorded',
    {
      action: 'key.created',
      actorType: 'user',
      actorId: 'usr_1',
      actorIp: '203.0.113.7',
      targetType: 'api_key',
      targetId: 'key_1',
      outcome: 'success',
      metadata: { name: 'ci', scopes: 2 },
      subjectUserId: 'usr_1',
    },
    {
      action: 'key.created',
      actor_type: 'user',
      actor_id: 'usr_1',
      actor_ip: '203.0.113.7',
      target_type: 'api_key',
      target_id: 'key_1',
      outcome: 'success',
      metadata: { name: 'ci', scopes: 2 },
      subject_user_id: 'usr_1',
    },
  ),
  of(
    WebhookDeliveryExhaustedSchema,
    'webhook.delivery.exhausted',
    { webhookId: 'wh_1', workspaceId: 'org_1', deliveryId: 'dlv_1', eventId: 'evt_9', eventType: 'key.created', exhaustedAt: timestampFromDate(at) },
    { webhook_id: 'wh_1', workspace_id: 'org_1', delivery_id: 'dlv_1', event_id: 'evt_9', event_type: 'key.created', exhausted_at: '2025-05-01T09:30:00.000Z' },
  ),
  of(
    WebhookEndpointRecoveredSchema,
    'webhook.endpoint.recovered',
    { webhookId: 'wh_1', workspaceId: 'org_1', url: 'https://example.com/hook', failingSince: timestampFromDate(at), recoveredAt: timestampFromDate(later) },
    {
      webhook_id: 'wh_1',
      workspace_id: 'org_1',
      url: 'https://example.com/hook',
      failing_since: '2025-05-01T09:30:00.000Z',
      recovered_at: '2025-05-31T09:30:00.123Z',
    },
  ),
  of(
    WebhookTestSchema,
    'webhook.test',
    { webhookId: 'wh_1', workspaceId: 'org_1', message: 'This is a test delivery from Switchboard.' },
    { webhook_id: 'wh_1', workspace_id: 'org_1', message: 'This is a test delivery from Switchboard.' },
  ),
];

describe('event data', () => {
  it('covers every payload message of events.proto, each naming its own type', () => {
    const payloads = file_switchboard_events_v1_events.messages.filter((message) => hasOption(message, event_type));
    expect(payloads.map((message) => message.typeName).sort()).toEqual(cases.map((c) => c.schema.typeName).sort());
    // Every message but the envelope is a payload.
    expect(payloads).toHaveLength(file_switchboard_events_v1_events.messages.length - 1);
    expect(new Set(cases.map((c) => c.type)).size).toBe(cases.length);
  });

  for (const { schema, type, data, json } of cases) {
    it(`${type}: the producer's message is written as its JSON and decoded back into the same message`, () => {
      expect(eventTypeOf(schema)).toBe(type);
      // Key for key, in proto field order (what webhook receivers get, byte for byte).
      expect(JSON.stringify(eventDataToJson(schema, data))).toBe(JSON.stringify(json));

      const wire = JSON.stringify(buildEventPayload('evt_1', { type, workspaceId: 'org_1', data: eventDataToJson(schema, data) }, 'test'));
      const received = decodeEvent(schema, parseEventEnvelope(wire));
      expect(received.json).toStrictEqual(json);
      if (schema.fields.length > 0) expect(toBinary(schema, received.data)).toEqual(toBinary(schema, create(schema, data as never)));
    });
  }

  it('writes the JSON of every webhook type as its published schema says (the event catalog)', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    formats.default(ajv);
    const webhookCases = cases.filter((c) => webhookEventType(c.type));
    expect(webhookCases.map((c) => c.type).sort()).toEqual(
      webhookEventCatalog()
        .map((entry) => entry.type)
        .sort(),
    );
    for (const { schema, type, data } of webhookCases) {
      const wire = JSON.stringify(buildEventPayload('evt_1', { type, workspaceId: 'org_1', data: eventDataToJson(schema, data) }, 'test'));
      const event = parseEventEnvelope(wire);
      // The delivered data leaves out the spend alert's target URL (services/webhooks/src/intake.ts).
      const { alert_url: _target, ...delivered } = event.data;
      const validate = ajv.compile(webhookEventType(type)!.schema);
      const body = { id: event.event_id, type, timestamp: event.occurred_at, data: delivered };
      expect(validate(body), `${type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  it('refuses data that does not fit the message, and an event of another type', () => {
    expect(() => eventDataFromJson(KeyRevokedSchema, { key_id: 5 })).toThrow();
    expect(() => eventDataFromJson(UsageRecordedSchema, { occurred_at: 'yesterday' })).toThrow();
    const keyRevoked = parseEventEnvelope(JSON.stringify(buildEventPayload('evt_1', { type: 'key.revoked', data: { key_id: 'key_1' } }, 'test')));
    expect(() => decodeEvent(KeyUpdatedSchema, keyRevoked)).toThrow(/key.revoked event where key.updated/);
  });

  it('ignores fields a newer producer added', () => {
    expect(eventDataFromJson(KeyUpdatedSchema, { key_id: 'key_1', new_field: 1 }).keyId).toBe('key_1');
  });

  it('does not compile a renamed field, on either side', () => {
    // @ts-expect-error a producer naming a field the message does not have
    eventDataToJson(KeyRevokedSchema, { keyIdentifier: 'key_1' });
    // @ts-expect-error a snake_case (JSON) name where the message has keyId
    eventDataToJson(KeyRevokedSchema, { key_id: 'key_1' });
    const consumer = (event: ReceivedEvent<typeof KeyRevokedSchema>) =>
      // @ts-expect-error a consumer reading a field the message does not have
      event.data.key_id;
    expect(consumer).toBeTypeOf('function');
  });
});
