import { ConversationService, FeedbackService, RoutingService } from '@switchboard/contracts/switchboard/conversations/v1/conversations_pb';
import { memberClaims, outcomeOf, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'conversations');

/** The conversations service as the skeleton leaves it: it boots, migrates, and guards every RPC by its proto rule. */
describe('conversations service', () => {
  beforeAll(() => service.start());
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, and answers Unimplemented past the access rule', async () => {
    expect(await outcomeOf(service.client(ConversationService, null).listConversations({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(ConversationService, { caller: 'gateway' }).listConversations({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(ConversationService, memberClaims('developer')).createConversation({}))).toBe('Unimplemented');
    expect(await outcomeOf(service.client(FeedbackService, memberClaims('developer')).recordFeedback({}))).toBe('Unimplemented');
    expect(await outcomeOf(service.client(RoutingService, memberClaims('owner')).routeModel({}))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(RoutingService, { caller: 'data-plane' }).routeModel({}))).toBe('Unimplemented');
  });
});
