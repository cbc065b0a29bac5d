import { EventService, WebhookService } from '@switchboard/contracts/switchboard/webhooks/v1/webhooks_pb';
import { memberClaims, outcomeOf, ServiceUnderTest } from '@switchboard/runtime/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const service = new ServiceUnderTest(new URL('../dist/src/main.js', import.meta.url), 'webhooks');

/** The webhooks service's RPC guards: every RPC passes its proto rule first, then the handler's checks. */
describe('webhooks service', () => {
  beforeAll(() => service.start());
  afterAll(() => service.stop());

  it('refuses calls without a mesh token or principal, and checks the workspace of the path past the access rule', async () => {
    expect(await outcomeOf(service.client(WebhookService, null).listWebhooks({}))).toBe('Unauthenticated');
    expect(await outcomeOf(service.client(WebhookService, { caller: 'gateway' }).listWebhooks({}))).toBe('Unauthenticated');
    // A handler rule: the handler refuses a path naming another workspace than the token's.
    expect(await outcomeOf(service.client(WebhookService, memberClaims('admin')).listWebhooks({ workspaceId: 'org_other' }))).toBe('NotFound');
    expect(await outcomeOf(service.client(EventService, memberClaims('owner')).publishEvent({}))).toBe('PermissionDenied');
    expect(await outcomeOf(service.client(EventService, { caller: 'data-plane' }).publishEvent({}))).toBe('InvalidArgument');
    // A NUL anywhere in the data is refused as input, never a failed write of the outbox's jsonb.
    const withNul = { workspaceId: 'org_test', type: 'agent.completed', data: { 'k\u0000': 'v' } };
    expect(await outcomeOf(service.client(EventService, { caller: 'data-plane' }).publishEvent(withNul))).toBe('InvalidArgument');
    expect(await outcomeOf(service.client(EventService, { caller: 'data-plane' }).publishEvent({ ...withNul, data: { run: 'a\u0000b' } }))).toBe(
      'InvalidArgument',
    );
    expect(await outcomeOf(service.client(EventService, { caller: 'data-plane' }).publishEvent({ ...withNul, data: { run: 'ok' } }))).toBe('ok');
  });
});
