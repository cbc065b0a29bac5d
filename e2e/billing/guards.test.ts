import { fileURLToPath } from 'node:url';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { freePort } from '@switchboard/runtime/infra';
import { eventually, startService } from '@switchboard/runtime/testing';
import { tokenOf, waitForMail } from '@switchboard/testkit/account-helpers';
import { EventBus } from '@switchboard/testkit/events';
import { bootMesh, expectErrorBody, type RestCall, restClient, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { EventTap } from '@switchboard/testkit/webhook-receiver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The payment provider guard and the free credit through their real paths
 * (docs/api/billing.md#free-credit-and-the-sandbox):
 *  - billing started as production without Stripe and without BILLING_SANDBOX=true refuses to
 *    start, naming both; with either it starts;
 *  - the free credit reaches the personal workspace once the email is verified, once per user
 *    whatever is verified or redelivered; organizations start at 0 (this mesh opens accounts at 0);
 *  - with Stripe configured the sandbox's pages are 404, even for a checkout made while the
 *    sandbox ran; with no provider at all a top-up is 503 naming the settings.
 */

const billingMain = fileURLToPath(new URL('../../services/billing/dist/src/main.js', import.meta.url));

describe('a production start of billing', () => {
  it('is refused without STRIPE_SECRET_KEY and without BILLING_SANDBOX=true, naming both', async () => {
    const refusedEnvs: Record<string, string>[] = [{ NODE_ENV: 'production' }, { NODE_ENV: 'production', BILLING_SANDBOX: 'false' }];
    for (const env of refusedEnvs) {
      const refused = await startService(billingMain, { env, healthTimeoutMs: 20_000 }).then(
        (running) => running.stop().then(() => 'started'),
        (err: Error) => err.message,
      );
      expect(refused).toMatch(/exited with code 1 before it was healthy/);
      expect(refused).toMatch(/STRIPE_SECRET_KEY .*BILLING_SANDBOX=true/);
    }
  });

  it('is refused with SANDBOX_OPENING_CREDIT_USD, and starts with Stripe or with BILLING_SANDBOX=true', async () => {
    const opening = await startService(billingMain, { env: { NODE_ENV: 'production', BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '5' } }).then(
      (running) => running.stop().then(() => 'started'),
      (err: Error) => err.message,
    );
    expect(opening).toMatch(/SANDBOX_OPENING_CREDIT_USD is refused with NODE_ENV=production/);
    const stripe = {
      STRIPE_SECRET_KEY: 'sk_test_guards',
      STRIPE_WEBHOOK_SECRET: 'whsec_guards',
      // https in production (the secret key never in clear text); no call is made at start.
      STRIPE_API_BASE: `https://127.0.0.1:${await freePort()}`,
    };
    const startingEnvs: Record<string, string>[] = [
      { NODE_ENV: 'production', ...stripe },
      { NODE_ENV: 'production', BILLING_SANDBOX: 'true' },
    ];
    for (const env of startingEnvs) {
      const running = await startService(billingMain, { env });
      await running.stop();
    }
  });
});

describe('billing in a mesh whose accounts open at 0', () => {
  let mesh: Mesh;
  let call: RestCall;
  let bus: EventBus;
  let tap: EventTap;

  beforeAll(async () => {
    tap = await EventTap.start();
    mesh = await bootMesh({ ...tap.env(), BILLING_SANDBOX: 'true', SANDBOX_OPENING_CREDIT_USD: '0', FREE_CREDIT_USD: '1.00' });
    call = restClient(mesh.gatewayUrl);
    bus = await EventBus.connect();
  });

  afterAll(async () => {
    await bus?.close();
    await mesh?.stop();
    await tap?.close();
  });

  async function balanceOf(user: SignedUp, workspaceId?: string): Promise<string> {
    const response = await call('GET', '/v1/billing/balance', { token: user.token, headers: workspaceId ? { 'x-workspace-id': workspaceId } : undefined });
    expect(response.status, response.text).toBe(200);
    return response.json.balance_usd;
  }

  async function verificationToken(user: SignedUp): Promise<string> {
    return tokenOf(await waitForMail(mesh.env.MAILBOX_DIR, user.email, 'email_verification'));
  }

  /**
   * Restarts billing with `change` applied to the mesh's environment (the object each component's
   * environment is made from when it starts), and waits until the gateway reaches it again.
   */
  async function restartBilling(user: SignedUp, change: Record<string, string | undefined>) {
    await mesh.stopComponent('billing');
    for (const [name, value] of Object.entries(change)) {
      if (value === undefined) delete mesh.env[name];
      else mesh.env[name] = value;
    }
    await mesh.startComponent('billing');
    await eventually(async () => ((await call('GET', '/v1/billing/plan', { token: user.token })).status === 200 ? true : undefined), 'billing back', 30_000);
  }

  it('grants the free credit to the personal workspace only once the email is verified, once per user', async () => {
    const granted = bus.observe('billing.free_credit.granted');
    await bus.flush();
    const user = await signUp(call);
    const endpoint = await tap.subscribe(call, user, ['billing.free_credit.granted']);
    const token = await verificationToken(user);
    expect(await balanceOf(user)).toBe('0');

    // The same token five times at once: one verification, one credit.
    const answers = await Promise.all(Array.from({ length: 5 }, () => call('POST', '/v1/auth/verify-email', { body: { token } })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([204, 400, 400, 400, 400]);
    await eventually(async () => ((await balanceOf(user)) === '1.00' ? true : undefined), 'the free credit');

    // More user.email_verified events for the user (another verification, a relay's redelivery), at once: nothing more.
    const data = { user_id: user.userId, personal_workspace_id: user.workspaceId, verified_at: new Date().toISOString() };
    await Promise.all(Array.from({ length: 4 }, () => bus.publish('user.email_verified', user.workspaceId, data, { producer: 'identity', redeliver: true })));
    // A later user's credit shows those were handled before it (one consumer, in stream order).
    const later = await signUp(call);
    expectErrorBody(await call('POST', '/v1/auth/verify-email', { body: { token } }), 400, 'invalid_token', 'token');
    expect((await call('POST', '/v1/auth/verify-email', { body: { token: await verificationToken(later) } })).status).toBe(204);
    await eventually(async () => ((await balanceOf(later)) === '1.00' ? true : undefined), 'the later user’s free credit');
    expect(await balanceOf(user)).toBe('1.00');

    await eventually(async () => (granted.length >= 2 ? true : undefined), 'billing.free_credit.granted of both users');
    const mine = granted.filter((event) => event.data.user_id === user.userId);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      workspace_id: user.workspaceId,
      data: { workspace_id: user.workspaceId, user_id: user.userId, amount_usd: '1.00', balance_usd: '1.00' },
    });
    expect((await endpoint.delivered('billing.free_credit.granted')).data).toEqual(mine[0].data);
  });

  it('starts an organization at 0, also for a verified owner', async () => {
    const user = await signUp(call);
    expect((await call('POST', '/v1/auth/verify-email', { body: { token: await verificationToken(user) } })).status).toBe(204);
    await eventually(async () => ((await balanceOf(user)) === '1.00' ? true : undefined), 'the free credit');
    const created = await call('POST', '/v1/organizations', { token: user.token, body: { name: 'Guards Inc' } });
    expect(created.status, created.text).toBe(201);
    const orgId = created.json.organization.org_id as string;
    expect(await balanceOf(user, orgId)).toBe('0');
    expect(await balanceOf(user)).toBe('1.00');
  });

  it('answers 404 for the sandbox pages once Stripe is configured, and 503 naming the settings without any provider', async () => {
    const user = await signUp(call);
    const body = { amount_usd: '5.00', idempotency_key: 'guards-1' };
    const created = await call('POST', '/v1/billing/topup', { token: user.token, body });
    expect(created.status, created.text).toBe(201);
    const page = new URL(created.json.checkout_url).pathname;
    expect((await call('GET', page)).status).toBe(200);

    // Stripe's keys (its API at a port nobody listens on: no call to it is needed here).
    await restartBilling(user, {
      STRIPE_SECRET_KEY: 'sk_test_guards',
      STRIPE_WEBHOOK_SECRET: 'whsec_guards',
      STRIPE_API_BASE: `http://127.0.0.1:${await freePort()}`,
      STRIPE_TIMEOUT: '1s',
    });
    expectErrorBody(await call('GET', page), 404, 'checkout_not_found');
    expectErrorBody(await call('POST', `${page}/complete`), 404, 'checkout_not_found');
    expect(await balanceOf(user)).toBe('0');

    // Neither Stripe nor the sandbox: top-ups are 503, naming what to set; the pages stay 404.
    await restartBilling(user, { STRIPE_SECRET_KEY: undefined, STRIPE_WEBHOOK_SECRET: undefined, STRIPE_API_BASE: undefined, BILLING_SANDBOX: 'false' });
    const refused = await call('POST', '/v1/billing/topup', { token: user.token, body: { amount_usd: '5.00', idempotency_key: 'guards-2' } });
    expectErrorBody(refused, 503, 'payment_provider_unavailable');
    expect(refused.json.error.message).toMatch(/STRIPE_SECRET_KEY.*BILLING_SANDBOX=true/);
    expectErrorBody(await call('POST', `${page}/complete`), 404, 'checkout_not_found');

    // The sandbox back: the checkout of before is payable again.
    await restartBilling(user, { BILLING_SANDBOX: 'true' });
    const paid = await call('POST', `${page}/complete`);
    expect(paid.status, paid.text).toBe(200);
    expect(await balanceOf(user)).toBe('5.00');
  });
});
