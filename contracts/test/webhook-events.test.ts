import { fromJson, getOption, type JsonObject } from '@bufbuild/protobuf';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { comments } from '../src/gen/comments.js';
import { event_type, file_switchboard_events_v1_events } from '../src/gen/switchboard/events/v1/events_pb.js';
import { webhookEventCatalog, webhookEventMessages, webhookEventType } from '../src/webhook-events.js';

/**
 * The event catalog (docs/webhooks.md#the-event-catalog): a schema per subscribable type, derived
 * from events.proto, that its example fits and a wrong body does not. Every delivery the test
 * suite receives is also validated against it (testkit/src/webhook-payloads.ts).
 */

const ajv = new Ajv2020({ strict: true, allErrors: true });
formats.default(ajv);
const validatorOf = (type: string) => ajv.compile(webhookEventType(type)!.schema);
const valid = (type: string, body: unknown) => validatorOf(type)(body);
const exampleOf = (type: string) => structuredClone(webhookEventType(type)!.example) as JsonObject & { data: JsonObject };

describe('webhook event catalog', () => {
  it('has every payload message events.proto marks as a webhook type, once', () => {
    const marked = file_switchboard_events_v1_events.messages.filter((message) => /^"[^"]+" \(webhook\b/.test(comments[message.typeName] ?? ''));
    expect(webhookEventMessages.map((message) => message.typeName).sort()).toEqual(marked.map((message) => message.typeName).sort());
    const types = webhookEventCatalog().map((entry) => entry.type);
    expect(new Set(types).size).toBe(types.length);
    expect(types).toEqual(webhookEventMessages.map((message) => getOption(message, event_type)));
  });

  it.each(webhookEventCatalog().map((entry) => [entry.type]))('%s: the example fits the schema and its message', (type) => {
    const entry = webhookEventType(type)!;
    expect(entry.description).toMatch(/^[A-Z].*\.$/);
    const validate = validatorOf(type);
    expect(validate(entry.example), ajv.errorsText(validate.errors)).toBe(true);
    // The example's data is a JSON form of the payload message (free-form data aside).
    const message = webhookEventMessages.find((m) => getOption(m, event_type) === type)!;
    if (message.fields.length > 0) expect(() => fromJson(message, (entry.example as { data: JsonObject }).data)).not.toThrow();
  });

  it('describes every field from the protos, nullable exactly where the runtime writes null', () => {
    const schema = webhookEventType('key.revoked')!.schema as { properties: { data: { properties: Record<string, { type: unknown; description?: string }> } } };
    const fields = schema.properties.data.properties;
    expect(fields.revoked_by).toMatchObject({ type: ['string', 'null'], description: expect.stringMatching(/null for automatic/) });
    expect(fields.key_id.type).toBe('string');
    const exhausted = webhookEventType('webhook.delivery.exhausted')!.schema as typeof schema;
    expect(exhausted.properties.data.properties.exhausted_at.type).toEqual(['string', 'null']);
    // The target URL of a spend alert is not part of the delivered data.
    const alert = webhookEventType('key.spend_alert')!.schema as typeof schema;
    expect(Object.keys(alert.properties.data.properties)).not.toContain('alert_url');
  });

  it('refuses bodies that are not what the runtime writes', () => {
    const wrong: Array<[string, (body: JsonObject & { data: JsonObject }) => unknown]> = [
      ['key.revoked', ({ id: _id, ...body }) => body],
      ['key.revoked', (body) => ({ ...body, id: 'dlv_1' })],
      ['key.revoked', (body) => ({ ...body, type: 'key.created' })],
      ['key.revoked', (body) => ({ ...body, timestamp: '20 Nov 2026' })],
      ['key.revoked', (body) => ({ ...body, extra: true })],
      ['key.revoked', (body) => ({ ...body, data: { ...body.data, key_id: null } })],
      ['key.revoked', ({ data: { reason: _reason, ...data }, ...body }) => ({ ...body, data })],
      ['key.revoked', (body) => ({ ...body, data: { ...body.data, unknown_field: 'x' } })],
      ['billing.topup.completed', (body) => ({ ...body, data: { ...body.data, amount_usd: 25 } })],
      ['billing.topup.completed', (body) => ({ ...body, data: { ...body.data, amount_usd: '1e3' } })],
      ['billing.topup.completed', (body) => ({ ...body, data: { ...body.data, balance_version: 42 } })],
      ['billing.topup.completed', (body) => ({ ...body, data: { ...body.data, completed_at: '2026-11-20T08:00:00Z' } })],
      ['key.spend_alert', (body) => ({ ...body, data: { ...body.data, alert_url: 'https://example.com' } })],
      ['key.spend_alert', (body) => ({ ...body, data: { ...body.data, threshold_pct: '80' } })],
      ['agent.completed', (body) => ({ ...body, data: ['not', 'an', 'object'] })],
    ];
    for (const [type, change] of wrong) {
      const body = change(exampleOf(type));
      expect(valid(type, body), `${type} ${JSON.stringify(body)}`).toBe(false);
    }
    // What may vary: any JSON object for agent.completed, finer timestamps, negative balances.
    expect(valid('agent.completed', { ...exampleOf('agent.completed'), data: {} })).toBe(true);
    expect(valid('key.expired', { ...exampleOf('key.expired'), timestamp: '2026-11-20T08:00:00Z' })).toBe(true);
    const lost = exampleOf('billing.dispute.lost');
    expect(valid('billing.dispute.lost', { ...lost, data: { ...lost.data, balance_usd: '-0.000123' } })).toBe(true);
  });
});
