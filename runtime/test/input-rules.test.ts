import { create, type DescField, type DescService, getOption, hasOption } from '@bufbuild/protobuf';
import { Code, type ConnectError, createContextValues } from '@connectrpc/connect';
import { field as fieldRules } from '@switchboard/contracts/buf/validate/validate_pb';
import { ErrorDetailSchema, field as fieldOption } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import * as billing from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import * as conversations from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import * as identity from '@switchboard/contracts/switchboard/identity/v1/identity_pb';
import * as keys from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import * as webhooks from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { webhookEventMessages } from '@switchboard/contracts/webhook-events';
import { describe, expect, it } from 'vitest';
import { eventTypeOf } from '../src/event-data.js';
import { checkingInput, inputCheckedInHandler, inputCheckOf, inputProblem, violationOf } from '../src/input-rules.js';
import { ruleOf } from '../src/policy.js';

/** The input rules of the protos and where the services check them (docs/conventions.md#input-rules). */

const services: DescService[] = [billing, conversations, identity, keys, webhooks].flatMap((module) =>
  Object.values(module).filter((value): value is DescService => (value as { kind?: string }).kind === 'service'),
);
const methods = services.flatMap((service) => service.methods);
const messages = [billing, conversations, identity, keys, webhooks].flatMap((module) =>
  Object.values(module).filter((value) => (value as { kind?: string }).kind === 'message'),
) as Array<{ fields: DescField[]; typeName: string }>;

/** The public code and field of a refusal. */
const refusal = (err: ConnectError | undefined) => {
  expect(err?.code).toBe(Code.InvalidArgument);
  const detail = err?.findDetails(ErrorDetailSchema)[0];
  return { code: detail?.code, field: detail?.field };
};

describe('the annotations', () => {
  it('compile, and a request keeping them passes', () => {
    expect(violationOf(keys.CreateKeyRequestSchema, create(keys.CreateKeyRequestSchema, { name: 'ok', routingPolicy: 'any' }))).toBeUndefined();
    // Every request message compiles (a rule that cannot would throw here, not at a client's call).
    for (const method of methods) expect(() => violationOf(method.input, create(method.input))).not.toThrow();
  });

  it('name the field at fault as a JSON path, with a sentence naming it and its rule', () => {
    const cases: Array<[ConnectError | undefined, string, string]> = [
      [
        violationOf(keys.CreateKeyRequestSchema, create(keys.CreateKeyRequestSchema, { name: 'ok', routingPolicy: 'nowhere' })),
        'routing_policy',
        'routing_policy must be one of cn-only, overseas-only, any.',
      ],
      [
        violationOf(
          keys.UpdateKeySpendLimitsRequestSchema,
          create(keys.UpdateKeySpendLimitsRequestSchema, { spendLimits: [{ period: 'day' }, { period: 'year' }] }),
        ),
        'spend_limits[1].period',
        'spend_limits[1].period must be one of day, week, month, total.',
      ],
      [
        violationOf(
          conversations.RecordFeedbackRequestSchema,
          create(conversations.RecordFeedbackRequestSchema, { rating: 1, tags: ['fine', 'x'.repeat(51)] }),
        ),
        'tags[1]',
        'tags[1] may be at most 50 characters.',
      ],
      [
        violationOf(conversations.RecordFeedbackRequestSchema, create(conversations.RecordFeedbackRequestSchema, { rating: 0 })),
        'rating',
        'rating must be one of 1, -1.',
      ],
      [violationOf(keys.ListKeysRequestSchema, create(keys.ListKeysRequestSchema, { limit: 101 })), 'limit', 'limit must be an integer from 1 to 100.'],
      [
        violationOf(keys.UpdateSpendCapRequestSchema, create(keys.UpdateSpendCapRequestSchema, { monthlySpendCapUsd: '1e3' })),
        'monthly_spend_cap_usd',
        'monthly_spend_cap_usd must be a decimal string such as "12.50" (digits, optionally a point and more digits; no sign, exponent or spaces), with at most 15 digits before the point and 12 after it.',
      ],
      [
        violationOf(keys.CreateKeyRequestSchema, create(keys.CreateKeyRequestSchema, { name: 'k', monthlySpendCapUsd: `${'9'.repeat(16)}.5` })),
        'monthly_spend_cap_usd',
        'monthly_spend_cap_usd must be a decimal string such as "12.50" (digits, optionally a point and more digits; no sign, exponent or spaces), with at most 15 digits before the point and 12 after it.',
      ],
      [violationOf(identity.VerifyEmailRequestSchema, create(identity.VerifyEmailRequestSchema)), 'token', 'token is required.'],
      [
        violationOf(
          webhooks.CreateWebhookRequestSchema,
          create(webhooks.CreateWebhookRequestSchema, { url: 'https://x.example', events: ['key.created', 'nope'] }),
        ),
        'events[1]',
        `events[1] must be one of ${webhookEventMessages.map(eventTypeOf).join(', ')}.`,
      ],
    ];
    for (const [err, field, message] of cases) {
      expect(refusal(err)).toEqual({ code: 'invalid_request', field });
      expect(err?.rawMessage).toBe(message);
    }
    // Empty is the default of a filter, not a value out of its set.
    expect(violationOf(keys.ListKeysRequestSchema, create(keys.ListKeysRequestSchema, { status: '' }))).toBeUndefined();
  });

  it('list the event types of the catalog, no more and no fewer', () => {
    const rules = getOption(webhooks.CreateWebhookRequestSchema.field.events, fieldRules).type;
    expect(rules.case === 'repeated' && rules.value.items?.type.case === 'string' ? rules.value.items.type.value.in : []).toEqual(
      webhookEventMessages.map(eventTypeOf),
    );
    const stated = JSON.parse(getOption(webhooks.UpdateWebhookRequestSchema.field.events, fieldOption).schema);
    expect(stated.items.enum).toEqual(webhookEventMessages.map(eventTypeOf));
    // The answers that name an event type state the same set: an endpoint's subscriptions, a
    // delivery's type, the catalog's entries.
    const itemsIn = (f: DescField) => {
      const r = getOption(f, fieldRules).type;
      return r.case === 'repeated' && r.value.items?.type.case === 'string' ? r.value.items.type.value.in : [];
    };
    const stringIn = (f: DescField) => {
      const r = getOption(f, fieldRules).type;
      return r.case === 'string' ? r.value.in : [];
    };
    expect(itemsIn(webhooks.WebhookSchema.field.events)).toEqual(webhookEventMessages.map(eventTypeOf));
    expect(stringIn(webhooks.DeliverySchema.field.eventType)).toEqual(webhookEventMessages.map(eventTypeOf));
    expect(stringIn(webhooks.WebhookEventTypeSchema.field.type)).toEqual(webhookEventMessages.map(eventTypeOf));
  });

  it('state a JSON Schema object on Value fields only, and buf.validate rules on no Value field', () => {
    let stated = 0;
    for (const message of messages)
      for (const f of message.fields) {
        const isValue = f.fieldKind === 'message' && ['google.protobuf.Value', 'google.protobuf.ListValue'].includes(f.message.typeName);
        const schema = hasOption(f, fieldOption) ? getOption(f, fieldOption).schema : '';
        if (schema !== '') {
          stated++;
          expect(isValue, `${message.typeName}.${f.name}`).toBe(true);
          const parsed = JSON.parse(schema);
          expect(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed), `${message.typeName}.${f.name}`).toBe(true);
        }
        if (isValue) expect(hasOption(f, fieldRules), `${message.typeName}.${f.name}`).toBe(false);
      }
    expect(stated).toBeGreaterThanOrEqual(17);
  });
});

describe('where a method is checked', () => {
  it('is decided for every method of the protos (none is left unplaced)', () => {
    const declared = new Set([
      'switchboard.conversations.v1.ConversationService/UpdateConversation',
      'switchboard.conversations.v1.ConversationService/CreateMessage',
      'switchboard.conversations.v1.ConversationService/ListMessages',
      'switchboard.conversations.v1.FeedbackService/RecordFeedback',
    ]);
    const placed: Record<string, string[]> = {};
    for (const method of methods) {
      const name = `${method.parent.typeName}/${method.name}`;
      const check = inputCheckOf(method, ruleOf(method), declared.has(name));
      expect(typeof check, `${name}: ${JSON.stringify(check)}`).toBe('string');
      placed[check as string] = [...(placed[check as string] ?? []), method.name];
    }
    // The handler rules wait for their decision; the conversations' object routes and the feedback check after their lookup.
    expect(placed['at-decision']).toContain('UpdateKey');
    expect(placed['at-decision']).toContain('CreateInvitation');
    expect(placed['in-handler']?.sort()).toEqual(['CreateMessage', 'ListMessages', 'RecordFeedback', 'UpdateConversation']);
    expect(placed['before-handler']).toContain('CreateKey');
  });

  it('refuses to start a method that names an object in its path and checks before its lookup', () => {
    const method = conversations.ConversationService.method.createMessage;
    expect(inputCheckOf(method, ruleOf(method), false)).toMatchObject({ problem: expect.stringContaining('inputCheckedInHandler') });
    const router = { service: () => router, rpc: () => router } as never;
    expect(() => checkingInput(router).service(conversations.ConversationService, { createMessage: async () => ({}) } as never)).toThrow(
      /names an object in its path/,
    );
    // Declared without rules to check: a stale declaration is refused too.
    const noRules = conversations.ConversationService.method.getConversation;
    expect(inputCheckOf(noRules, ruleOf(noRules), true)).toMatchObject({ problem: expect.stringContaining('no rules') });
  });

  it('makes a declared handler that answers without checking a failure, and one that checks pass', async () => {
    let registered: Record<string, (req: unknown, ctx: unknown) => Promise<unknown>> = {};
    const router = {
      service: (_service: unknown, implementation: typeof registered) => {
        registered = implementation;
        return router;
      },
      rpc: () => router,
    };
    checkingInput(router as never).service(conversations.ConversationService, {
      createMessage: inputCheckedInHandler(async (_req: unknown, ctx: { values: never }) => ({ problem: inputProblem(ctx) })),
      listMessages: inputCheckedInHandler(async () => ({})),
    } as never);
    const ctx = () => ({ values: createContextValues() });
    const bad = create(conversations.CreateMessageRequestSchema, { role: 'robot', content: 'hi' });
    const answer = (await registered.createMessage(bad, ctx())) as { problem?: ConnectError };
    expect(answer.problem?.rawMessage).toBe('role must be one of user, assistant, system, tool.');
    await expect(registered.listMessages(create(conversations.ListMessagesRequestSchema), ctx())).rejects.toThrow(/without checking its input rules/);
  });
});
