import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { jetstream } from '@nats-io/jetstream';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import {
  ConversationService,
  ExchangeRecordSchema,
  ExchangeService,
  FeedbackService,
  RoutingService,
} from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import { connectNats, ensureWorkStream, workSubjects } from '@switchboard/runtime/nats';
import { eventually, memberClaims, outcomeOf, requireEnv, ServiceUnderTest, startService } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const main = new URL('../dist/src/main.js', import.meta.url);
const service = new ServiceUnderTest(main, 'conversations');

/** The failure of a call: its Connect code and the field its error detail names. */
function failure(call: Promise<unknown>): Promise<{ code: string; errorCode?: string; field?: string } | undefined> {
  return call.then(
    () => undefined,
    (err: unknown) => {
      const error = ConnectError.from(err);
      const detail = error.findDetails(ErrorDetailSchema)[0];
      return { code: Code[error.code], errorCode: detail?.code, field: detail?.field };
    },
  );
}

/** The conversations service on its own: it boots with the shipped model catalog, migrates, and guards every RPC by its proto rule. */
describe('conversations service', () => {
  beforeAll(() => service.start({ env: { ROUTING_SEED: '42' } }));
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, and serves workspace RPCs to a member', async () => {
    expect(await outcomeOf(service.client(ConversationService, null).listConversations({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(ConversationService, { caller: 'gateway' }).listConversations({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(FeedbackService, null).getFeedbackSummary({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(FeedbackService, { caller: 'gateway' }).recordFeedback({}))).toBe('Unauthenticated');

    const member = service.client(ConversationService, memberClaims('developer'));
    const created = await member.createConversation({ title: 'Support' });
    expect(created).toMatchObject({ conversationId: expect.stringMatching(/^conv_/), title: 'Support' });
    expect((await member.getConversation({ conversationId: created.conversationId })).conversationId).toBe(created.conversationId);
    expect(await outcomeOf(member.listConversations({}))).toBe('ok');

    const feedback = service.client(FeedbackService, memberClaims('developer'));
    // Past the access rule: the request itself is checked.
    expect(await failure(feedback.recordFeedback({}))).toMatchObject({ code: 'InvalidArgument', field: 'generation_id' });
    expect(await feedback.getFeedbackSummary({})).toMatchObject({ days: 30, total: 0, thumbsUp: 0, thumbsDown: 0 });
    expect(await failure(feedback.getFeedbackSummary({ days: 0 }))).toMatchObject({ code: 'InvalidArgument', field: 'days' });
  });

  it('routes and explains for the data plane only, over the shipped catalog', async () => {
    for (const claims of [memberClaims('owner'), { caller: 'gateway' }, { caller: 'billing' }, { caller: 'webhooks' }]) {
      const routing = service.client(RoutingService, claims);
      expect(await outcomeOf(routing.routeModel({ tier: 'fast', routingPolicy: 'any' })), JSON.stringify(claims)).toBe('PermissionDenied');
      expect(await outcomeOf(routing.explainRoute({ tier: 'fast', routingPolicy: 'any' })), JSON.stringify(claims)).toBe('PermissionDenied');
    }
    expect(await outcomeOf(service.client(RoutingService, null).routeModel({ tier: 'fast' }))).toBe('Unauthenticated');

    const dataPlane = service.client(RoutingService, { caller: 'data-plane' });
    expect(await failure(dataPlane.routeModel({}))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(dataPlane.routeModel({ tier: 'service/fast', routingPolicy: 'any' }))).toMatchObject({ code: 'InvalidArgument', field: 'tier' });
    expect(await failure(dataPlane.routeModel({ tier: 'fast', routingPolicy: 'eu-only' }))).toMatchObject({
      code: 'InvalidArgument',
      field: 'routing_policy',
    });
    // runtime/models.json: fast has one cn candidate (qwen-turbo) and two overseas ones.
    expect(await dataPlane.routeModel({ tier: 'fast', routingPolicy: 'cn-only' })).toMatchObject({ model: 'qwen-turbo', region: 'cn' });
    for (let i = 0; i < 20; i++) {
      const routed = await dataPlane.routeModel({ tier: 'fast', routingPolicy: 'overseas-only' });
      expect(['gpt-4o-mini', 'gpt-4.1-nano']).toContain(routed.model);
      expect(routed.region).toBe('overseas');
      const balanced = await dataPlane.routeModel({ tier: 'balanced', routingPolicy: 'cn-only' });
      expect(['qwen-max', 'deepseek-v3']).toContain(balanced.model);
      expect(balanced.region).toBe('cn');
    }
    const explained = await dataPlane.explainRoute({ tier: 'fast', routingPolicy: 'cn-only' });
    expect(explained).toMatchObject({ tier: 'fast', routingPolicy: 'cn-only', exploration: 0.05 });
    expect(explained.candidates.map((c) => [c.model, c.region, c.allowed])).toEqual([
      ['gpt-4o-mini', 'overseas', false],
      ['gpt-4.1-nano', 'overseas', false],
      ['qwen-turbo', 'cn', true],
    ]);
    // o3-mini serves no tier (passthrough only).
    expect((await dataPlane.explainRoute({ tier: 'balanced', routingPolicy: 'any' })).candidates.map((c) => c.model)).not.toContain('o3-mini');
  });

  it("appends the data plane's exchanges in order, all or nothing, to a conversation of the workspace it names", async () => {
    for (const claims of [memberClaims('owner'), { caller: 'gateway' }, { caller: 'billing' }]) {
      expect(await outcomeOf(service.client(ExchangeService, claims).appendExchange({})), JSON.stringify(claims)).toBe('PermissionDenied');
    }
    expect(await outcomeOf(service.client(ExchangeService, null).appendExchange({}))).toBe('Unauthenticated');

    const member = service.client(ConversationService, memberClaims('developer'));
    const exchanges = service.client(ExchangeService, { caller: 'data-plane' });
    const { conversationId } = await member.createConversation({});
    const contents = async () => (await member.listMessages({ conversationId, limit: 100 })).data.map((m) => [m.role, m.content]);
    const workspaceId = memberClaims('developer').workspaceId as string;
    const user = (content: string) => ({ role: 'user', content });
    const assistant = (content: string) => ({ role: 'assistant', content });

    // No messages: only the visibility check.
    expect((await exchanges.appendExchange({ workspaceId, conversationId })).messageIds).toEqual([]);
    const first = await exchanges.appendExchange({ workspaceId, conversationId, messages: [user('Hi'), assistant('Hello!')] });
    expect(first.messageIds).toEqual([expect.stringMatching(/^msg_/), expect.stringMatching(/^msg_/)]);
    await member.createMessage({ conversationId, role: 'system', content: 'between' });
    const second = await exchanges.appendExchange({ workspaceId, conversationId, messages: [user('And?')] });
    expect(await contents()).toEqual([
      ['user', 'Hi'],
      ['assistant', 'Hello!'],
      ['system', 'between'],
      ['user', 'And?'],
    ]);
    expect((await member.listMessages({ conversationId, limit: 100 })).data.map((m) => m.messageId)).toEqual([
      ...first.messageIds,
      expect.any(String),
      ...second.messageIds,
    ]);

    // Another workspace's conversation is one that does not exist, with or without messages, and even with a bad message.
    const notFound = { code: 'NotFound', errorCode: 'conversation_not_found' };
    for (const messages of [[], [user('x')], [{ role: 'system', content: 'x' }]]) {
      expect(await failure(exchanges.appendExchange({ workspaceId: 'org_other', conversationId, messages }))).toMatchObject(notFound);
      expect(await failure(exchanges.appendExchange({ workspaceId, conversationId: 'conv_missing', messages }))).toMatchObject(notFound);
    }

    const refused = (request: Parameters<typeof exchanges.appendExchange>[0]) => failure(exchanges.appendExchange({ workspaceId, conversationId, ...request }));
    expect(await failure(exchanges.appendExchange({ conversationId, messages: [user('x')] }))).toMatchObject({
      code: 'InvalidArgument',
      field: 'workspace_id',
    });
    expect(await failure(exchanges.appendExchange({ workspaceId, messages: [user('x')] }))).toMatchObject({
      code: 'InvalidArgument',
      field: 'conversation_id',
    });
    expect(await refused({ messages: [user('x'), { role: 'system', content: 'x' }] })).toMatchObject({ code: 'InvalidArgument', field: 'messages[1].role' });
    expect(await refused({ messages: [{ role: '', content: 'x' }] })).toMatchObject({ code: 'InvalidArgument', field: 'messages[0].role' });
    expect(await refused({ messages: [user('')] })).toMatchObject({ code: 'InvalidArgument', field: 'messages[0].content' });
    expect(await refused({ messages: [user('x'), assistant('y'.repeat(200_001))] })).toMatchObject({
      code: 'InvalidArgument',
      field: 'messages[1].content',
    });
    expect(await refused({ messages: Array.from({ length: 17 }, (_, i) => user(`${i}`)) })).toMatchObject({ code: 'InvalidArgument', field: 'messages' });
    // A refused exchange stores none of its messages.
    expect(await contents()).toHaveLength(4);

    // Up to 16 messages, up to 200,000 characters each (code points, not UTF-16 units).
    const many = await exchanges.appendExchange({
      workspaceId,
      conversationId,
      messages: Array.from({ length: 16 }, (_, i) => (i === 0 ? assistant('😀'.repeat(200_000)) : user(`${i}`))),
    });
    expect(many.messageIds).toHaveLength(16);
    expect((await contents()).slice(5).map(([, content]) => content)).toEqual(Array.from({ length: 15 }, (_, i) => `${i + 1}`));
  });

  it('appends each generation once, in stream order, to a conversation of the workspace the record names', async () => {
    const prefix = requireEnv('WORK_SUBJECT_PREFIX');
    const nc = await connectNats(requireEnv('NATS_URL'), 'conversations-test', createLogger('conversations-test', 'silent'));
    try {
      await ensureWorkStream(nc, requireEnv('WORK_STREAM'), prefix);
      const member = service.client(ConversationService, memberClaims('developer'));
      const workspaceId = memberClaims('developer').workspaceId as string;
      const { conversationId } = await member.createConversation({});
      const stranger = { ...memberClaims('developer'), workspaceId: newId('org') };
      const foreign = (await service.client(ConversationService, stranger).createConversation({})).conversationId;
      const publish = (generationId: string, conversation: string, contents: string[], msgID = `${generationId}.exchange`) =>
        jetstream(nc).publish(
          workSubjects(prefix).exchanges,
          toBinary(
            ExchangeRecordSchema,
            create(ExchangeRecordSchema, {
              generationId,
              workspaceId,
              conversationId: conversation,
              messages: contents.map((content, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content })),
            }),
          ),
          { msgID },
        );
      const first = newId('gen');
      await publish(first, conversationId, ['Hi', 'Hello!']);
      // Past JetStream's deduplication (another message id): the consumer still appends it once.
      await publish(first, conversationId, ['Hi', 'Hello!'], newId('msg'));
      await publish(newId('gen'), foreign, ['not yours']);
      await publish(newId('gen'), conversationId, ['And?', 'That is all.']);
      // Appended in stream order: once the last is there, the repeat and the stranger's were handled.
      const contents = async () => (await member.listMessages({ conversationId, limit: 100 })).data.map((m) => m.content);
      await eventually(async () => (await contents()).includes('That is all.'), 'the exchanges to be appended');
      expect(await contents()).toEqual(['Hi', 'Hello!', 'And?', 'That is all.']);
      expect((await service.client(ConversationService, stranger).listMessages({ conversationId: foreign })).data).toEqual([]);
    } finally {
      await nc.close();
    }
  });
});

describe('start-up with a malformed model catalog', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'switchboard-catalog-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const regions = {
    overseas: { base_url: 'https://overseas.example.com/v1', api_key_env: 'OVERSEAS_API_KEY' },
    cn: { base_url: 'https://cn.example.com/v1', api_key_env: 'CN_API_KEY' },
  };
  const model = (id: string, region: string, extra: Record<string, unknown> = {}) => ({
    id,
    region,
    tiers: ['fast'],
    input_usd_per_1m: '0.10',
    output_usd_per_1m: '0.40',
    ...extra,
  });

  /** Starts the compiled service on `catalog` and answers the output it exits with (fails if it starts). */
  async function refusedStart(name: string, catalog: unknown): Promise<string> {
    const file = path.join(dir, `${name}.json`);
    await writeFile(file, typeof catalog === 'string' ? catalog : JSON.stringify(catalog));
    const started = await startService(fileURLToPath(main), { env: { SWITCHBOARD_MODELS_FILE: file } }).then(
      async (running) => {
        await running.stop();
        return undefined;
      },
      (err: unknown) => (err as Error).message,
    );
    if (started === undefined) throw new Error(`the service started with the ${name} catalog`);
    return started;
  }

  it('refuses to start, exiting non-zero with a message naming the entry', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['unknown-region', { regions, models: [model('a', 'overseas'), model('b', 'eu')] }, 'models[1].region'],
      ['numeric-price', { regions, models: [model('a', 'overseas', { input_usd_per_1m: 0.15 })] }, 'models[0].input_usd_per_1m'],
      ['twice-in-a-region', { regions, models: [model('a', 'cn'), model('a', 'cn')] }, 'models[1] repeats a in cn'],
      ['not-json', '{"regions": {', 'is not JSON'],
    ];
    for (const [name, catalog, entry] of cases) {
      const output = await refusedStart(name, catalog);
      expect(output, name).toMatch(/exited with code [1-9]/);
      expect(output, name).toContain(entry);
      expect(output, name).toContain('conversations failed to start');
    }
    const missing = await startService(fileURLToPath(main), { env: { SWITCHBOARD_MODELS_FILE: path.join(dir, 'absent.json') } }).then(
      () => '',
      (err: unknown) => (err as Error).message,
    );
    expect(missing).toMatch(/exited with code [1-9]/);
    expect(missing).toContain('cannot read');
  });

  it('starts with a well-formed catalog and routes among its candidates', async () => {
    const file = path.join(dir, 'good.json');
    await writeFile(file, JSON.stringify({ regions, models: [model('own-a', 'overseas'), model('own-a', 'cn'), model('own-b', 'overseas')] }));
    const running = new ServiceUnderTest(main, 'conversations');
    await running.start({ env: { SWITCHBOARD_MODELS_FILE: file } });
    try {
      const dataPlane = running.client(RoutingService, { caller: 'data-plane' });
      expect(await dataPlane.routeModel({ tier: 'fast', routingPolicy: 'cn-only' })).toMatchObject({ model: 'own-a', region: 'cn' });
      expect(await failure(dataPlane.routeModel({ tier: 'balanced', routingPolicy: 'any' }))).toMatchObject({
        code: 'FailedPrecondition',
        errorCode: 'routing_policy_violation',
      });
    } finally {
      await running.stop();
    }
  });
});
