import { Code } from '@connectrpc/connect';
import { ConversationService, ExchangeService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { readConversationsConfig } from '@switchboard/conversations/config';
import { prepareConversations } from '@switchboard/conversations/prepare';
import { registerRoutes } from '@switchboard/conversations/server';
import { newId } from '@switchboard/runtime/ids';
import { type InProcessService, inProcessService, refusalOf } from '@switchboard/runtime/in-process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The conversations handlers in this process (createRouterTransport), built as main.ts builds
 * them on a schema of their own: how each RPC maps the caller, the input and the domain's answers.
 */

let service: InProcessService;
let clientAs: ReturnType<InProcessService['serve']>;

const workspaceId = newId('org');
const member = (role?: string) => ({ caller: 'gateway', principalId: newId('usr'), principalType: 'user' as const, workspaceId, role });

beforeAll(async () => {
  service = await inProcessService('conversations', new URL('../dist/migrations/', import.meta.url));
  const handlers = prepareConversations(service.runtime, readConversationsConfig({ ROUTING_SEED: '1' }));
  clientAs = service.serve((router) => registerRoutes(router, handlers));
});

afterAll(() => service?.stop());

describe('the conversations handlers', () => {
  it('refuse to start on a malformed setting, naming it', () => {
    expect(() => readConversationsConfig({ ROUTING_SEED: 'lucky' })).toThrow(/ROUTING_SEED/);
  });

  it('create a conversation, append to it and read it back in the caller’s workspace', async () => {
    const conversations = clientAs(ConversationService, member('developer'));
    const { conversationId } = await conversations.createConversation({ title: 'support' });
    await conversations.createMessage({ conversationId, role: 'user', content: 'hello' });
    expect((await conversations.getConversation({ conversationId })).title).toBe('support');
    expect((await conversations.listMessages({ conversationId })).data.map((message) => message.content)).toEqual(['hello']);
  });

  it('name the field of invalid input', async () => {
    const conversations = clientAs(ConversationService, member('developer'));
    expect(await refusalOf(conversations.createConversation({ title: 'x'.repeat(1000) }))).toMatchObject({ code: Code.InvalidArgument, field: 'title' });
    const { conversationId } = await conversations.createConversation({});
    expect(await refusalOf(conversations.createMessage({ conversationId, role: 'wizard', content: 'hi' }))).toMatchObject({
      code: Code.InvalidArgument,
      field: 'role',
    });
  });

  it('answer 404 for another workspace’s conversation, 403 without a role, 401 without a principal', async () => {
    const { conversationId } = await clientAs(ConversationService, member('developer')).createConversation({});
    const stranger = clientAs(ConversationService, { ...member('owner'), workspaceId: newId('org') });
    expect(await refusalOf(stranger.getConversation({ conversationId }))).toEqual({ code: Code.NotFound, error: 'conversation_not_found', field: '' });
    expect(await refusalOf(clientAs(ConversationService, member()).getConversation({ conversationId }))).toMatchObject({
      code: Code.PermissionDenied,
      error: 'forbidden',
    });
    expect(await refusalOf(clientAs(ConversationService, { caller: 'gateway' }).listConversations({}))).toMatchObject({
      code: Code.Unauthenticated,
      error: 'unauthenticated',
    });
  });

  it('keep the data plane’s RPCs to the data plane', async () => {
    const exchange = { workspaceId, conversationId: newId('conv'), messages: [{ role: 'user', content: 'hi' }] };
    expect(await refusalOf(clientAs(ExchangeService, member('owner')).appendExchange(exchange))).toMatchObject({ code: Code.PermissionDenied });
  });
});
