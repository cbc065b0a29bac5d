import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createLocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { signUp } from '@switchboard/testkit/mesh';
import { type Received, verifyDelivery, WebhookReceiver } from '@switchboard/testkit/webhook-receiver';
import type { Locator, Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteOfFile, expectHeading, input, invalidFieldText, openDashboard, settles, signInThroughUi } from './dashboard-browser.js';

/**
 * The Webhooks pages in Chromium, against the whole mesh and a local HTTPS receiver: register an
 * endpoint (its secret shown once), send a test and see the delivery succeed with its attempt and
 * the receiver's answer, redeliver, watch a delivery fail until exhausted and recover it, disable
 * and re-enable the endpoint, rotate the secret, delete the endpoint. Retries run on a
 * millisecond schedule. The Overview, where a new user lands, sums the workspace up: its money,
 * the keys near their caps and the deliveries failing.
 */

let receiver: WebhookReceiver;

const suite = dashboardSuiteOfFile(async () => {
  const certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  receiver = await WebhookReceiver.start(certificate);
  // The receiver is on loopback with a certificate of a local CA; retries come within milliseconds.
  return {
    WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: certificate.certFile,
    WEBHOOK_RETRY_SCHEDULE: '50ms,100ms',
    WEBHOOK_POLL_INTERVAL: '200ms',
  };
});

afterAll(async () => {
  await receiver?.close();
});

/** The receiver's requests to `hookPath` of the event type `type`, once there are `count` of them. */
async function received(hookPath: string, type: string, count: number): Promise<Received[]> {
  const matching = () => receiver.at(hookPath).filter((request) => (JSON.parse(request.body) as { type: string }).type === type);
  await expect.poll(() => matching().length, settles).toBe(count);
  return matching();
}

/** The row of the newest delivery in the log, once its status reads `status`. */
async function newestDelivery(page: Page, status: string): Promise<Locator> {
  const row = page.getByRole('region', { name: 'Deliveries' }).locator('tbody tr[data-delivery-id]').first();
  await expect.poll(() => row.innerText(), settles).toContain(status);
  return row;
}

/** The attempts panel of the delivery in `row` (opened if it is closed). */
async function attemptsOf(page: Page, row: Locator): Promise<Locator> {
  const id = await row.getAttribute('data-delivery-id');
  const toggle = row.getByRole('button', { name: /attempts/i });
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
  return page.locator(`[id="delivery-${id}"]`);
}

describe('the Webhooks pages', () => {
  it('registers an endpoint, tests it, redelivers, recovers, disables, rotates the secret and deletes it', async () => {
    const owner = await signUp(suite.call);
    const hookPath = '/dashboard-hook';
    receiver.reply(hookPath, () => ({ status: 200, body: 'thanks from the receiver' }));

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Webhooks' }).click();
    await expectHeading(page, 'Webhooks');
    await page.getByText('No endpoints yet').waitFor();

    // Refusals at their fields: an http:// URL (the API's), no event type ticked (the page's).
    const create = page.getByRole('region', { name: 'Add an endpoint' });
    await create.getByLabel('Endpoint URL').fill('http://localhost/hook');
    await create.getByRole('button', { name: 'Add endpoint' }).click();
    expect(await invalidFieldText(page, 'url')).toMatch(/https/);
    await checkPage(dashboard, 'webhooks-create-error');
    await create.getByLabel('Endpoint URL').fill(receiver.url(hookPath));
    await create.getByLabel('Every event type, also those added later').uncheck();
    await create.getByRole('button', { name: 'Add endpoint' }).click();
    expect(await invalidFieldText(page, 'events')).toContain('Tick at least one event type');
    // The event catalog: each type with when it is sent, and its example body and schema folded away.
    await create.getByLabel('webhook.endpoint.recovered').waitFor();
    await create.getByText('A key was created (never the full key).', { exact: true }).waitFor();
    expect(await create.getByLabel('key.spend_alert').count()).toBe(0);
    const keyCreated = create.locator('li').filter({ hasText: 'A key was created (never the full key).' });
    const details = keyCreated.locator('details');
    expect(await details.locator('pre').first().isVisible()).toBe(false);
    await keyCreated.getByText('Example and schema').click();
    const [example, schema] = await details.locator('pre').allInnerTexts();
    expect(JSON.parse(example)).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'key.created', data: { key_id: expect.stringMatching(/^key_/) } });
    expect(JSON.parse(schema)).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema', required: ['id', 'type', 'timestamp', 'data'] });
    await checkPage(dashboard, 'webhooks-event-catalog');
    await create.getByLabel('key.created').check();
    await create.getByLabel('Description').fill('The receiver of the dashboard test');
    await create.getByRole('button', { name: 'Add endpoint' }).click();

    // The secret, once, with a Copy button; the list shows the endpoint.
    const secret = await create.getByLabel('Signing secret').inputValue();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    await create.getByText('Shown only once.').waitFor();
    const endpoints = page.getByRole('region', { name: 'Endpoints' });
    const row = endpoints.getByRole('row', { name: new RegExp(receiver.url(hookPath)) });
    await expect.poll(() => row.innerText(), settles).toMatch(/key\.created\s+enabled/);
    await checkPage(dashboard, 'webhooks');

    // A test event: delivered, with the attempt's status code, timing and the receiver's body.
    await row.getByRole('link').click();
    await expectHeading(page, 'Webhook endpoint');
    await page.getByText('No deliveries yet').waitFor();
    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.getByText(/A webhook\.test event is on its way/).waitFor();
    const tested = await newestDelivery(page, 'succeeded');
    expect(await tested.innerText()).toMatch(/webhook\.test\s+succeeded\s+1/);
    const attempts = await attemptsOf(page, tested);
    await expect.poll(() => attempts.innerText(), settles).toMatch(/Result\s+success\s+Status code\s+200\s+Duration\s+\d+ ms/);
    expect(await attempts.locator('.response-body').innerText()).toBe('thanks from the receiver');
    const [first] = await received(hookPath, 'webhook.test', 1);
    expect(verifyDelivery(secret, first)).toMatchObject({ type: 'webhook.test' });
    await checkPage(dashboard, 'webhook');

    // Redelivered: a second attempt, by hand, with the same webhook-id.
    await attempts.getByRole('button', { name: 'Redeliver' }).click();
    await expect.poll(() => tested.innerText(), settles).toMatch(/succeeded\s+2/);
    await expect.poll(() => attempts.innerText(), settles).toContain('redelivery');
    const [, again] = await received(hookPath, 'webhook.test', 2);
    expect(again.headers['webhook-id']).toBe(first.headers['webhook-id']);

    // The receiver is down: the test's delivery is retried until exhausted, its answers logged.
    receiver.reply(hookPath, () => ({ status: 503, body: 'down for maintenance' }));
    await page.getByRole('button', { name: 'Send a test event' }).click();
    const failed = await newestDelivery(page, 'exhausted');
    expect(await failed.innerText()).toMatch(/exhausted\s+3/);
    const failedAttempts = await attemptsOf(page, failed);
    // The error class, and what it means.
    await expect
      .poll(() => failedAttempts.innerText(), settles)
      .toMatch(/failed \(http\)\s+The endpoint answered with a status code other than 2xx\.\s+Status code\s+503/);
    expect(await failedAttempts.locator('.response-body').first().innerText()).toBe('down for maintenance');
    await checkPage(dashboard, 'webhook-failed');

    // Back up: recovering from a time in the future is refused at its field; from a day ago it sends the one failure again.
    receiver.reply(hookPath, () => ({ status: 200, body: 'back again' }));
    const recover = page.getByRole('region', { name: 'Recover failed deliveries' });
    const defaultSince = await recover.getByLabel('Created since').inputValue();
    await recover.getByLabel('Created since').fill('2099-01-01T00:00');
    await recover.getByRole('button', { name: 'Recover' }).click();
    expect(await invalidFieldText(recover, 'since')).toMatch(/future/);
    await recover.getByLabel('Created since').fill(defaultSince);
    await recover.getByRole('button', { name: 'Recover' }).click();
    await recover.getByText('1 delivery is sent again.').waitFor();
    await expect.poll(() => failed.innerText(), settles).toMatch(/succeeded\s+4/);

    // Disabled by hand: the status says so, and a test is refused in words.
    const settings = page.getByRole('region', { name: 'Settings' });
    await settings.getByLabel(/^Enabled/).uncheck();
    await settings.getByRole('button', { name: 'Save changes' }).click();
    await settings.getByText('The endpoint is saved.').waitFor();
    await page.getByText('disabled by hand').first().waitFor();
    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page
      .getByRole('alert')
      .getByText(/disabled/)
      .waitFor();
    await checkPage(dashboard, 'webhook-disabled');
    await settings.getByLabel(/^Enabled/).check();
    await settings.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(() => page.getByRole('region', { name: receiver.url(hookPath) }).innerText(), settles).toMatch(/Status\s+enabled/);

    // A new secret, once: during the grace period a delivery carries both signatures.
    const rotate = page.getByRole('region', { name: 'Signing secret' });
    await rotate.getByRole('button', { name: 'Rotate secret' }).click();
    const newSecret = await rotate.getByLabel('New signing secret').inputValue();
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(secret);
    await page.getByRole('button', { name: 'Send a test event' }).click();
    const [, , , , , , rotated] = await received(hookPath, 'webhook.test', 7);
    expect(String(rotated.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifyDelivery(newSecret, rotated)).toMatchObject({ type: 'webhook.test' });
    expect(verifyDelivery(secret, rotated)).toMatchObject({ type: 'webhook.test' });

    // Leaving the page forgets the secret.
    await page.getByRole('link', { name: 'All endpoints' }).click();
    await expectHeading(page, 'Webhooks');
    await row.getByRole('link').click();
    await expectHeading(page, 'Webhook endpoint');
    await page.getByRole('region', { name: 'Signing secret' }).waitFor();
    expect(await input(page, 'grace_period_seconds').count()).toBe(1);
    expect(await page.getByLabel('New signing secret').count()).toBe(0);
    expect(await page.locator('input.secret').count()).toBe(0);

    // Deleted after a confirmation: back to the list, empty.
    const remove = page.getByRole('region', { name: 'Delete the endpoint' });
    await remove.getByRole('button', { name: 'Delete endpoint' }).click();
    await remove.getByRole('button', { name: 'Delete', exact: true }).click();
    await expectHeading(page, 'Webhooks');
    await page.getByText('No endpoints yet').waitFor();
    expect((await suite.call('GET', `/v1/workspaces/${owner.workspaceId}/webhooks`, { token: owner.token })).json.data).toEqual([]);
    await dashboard.context.close();
  }, 60_000);

  it('opens on the overview: the balance, this month, the keys near their caps and the failing deliveries', async () => {
    const owner = await signUp(suite.call);
    const auth = { token: owner.token };
    const hookPath = '/overview-hook';
    receiver.reply(hookPath, () => ({ status: 503, body: 'down' }));
    const hook = await suite.call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks`, {
      ...auth,
      // An event type this test never causes: the test event is the endpoint's one delivery.
      body: { url: receiver.url(hookPath), events: ['agent.completed'], description: 'Order system' },
    });
    expect(hook.status, hook.text).toBe(201);
    const test = await suite.call('POST', `/v1/workspaces/${owner.workspaceId}/webhooks/${hook.json.webhook_id}/test`, { ...auth, body: {} });
    expect(test.status, test.text).toBe(202);

    // Two capped keys: 0.21 USD spent of 0.25 (84%, near) and of 10 (2%, not).
    const keyWithCap = async (name: string, cap: string) => {
      const created = await suite.call('POST', '/v1/keys', { ...auth, body: { name, monthly_spend_cap_usd: cap } });
      expect(created.status, created.text).toBe(201);
      return created.json.key.key_id as string;
    };
    const near = await keyWithCap('Nightly batch', '0.25');
    const far = await keyWithCap('Website', '10');
    const usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
    for (const keyId of [near, far]) {
      await usage.recordUsage({
        generationId: `gen_overview_${keyId}`,
        keyId,
        workspaceId: owner.workspaceId,
        model: 'acme/large',
        upstreamCostUsd: '0.2',
        inputTokens: 1000n,
        outputTokens: 500n,
      });
    }
    await eventually(async () => {
      const { data } = (await suite.call('GET', '/v1/keys', auth)).json as { data: { month_to_date_spend_usd: string }[] };
      return data.every((key) => key.month_to_date_spend_usd === '0.21');
    }, 'the keys spend');
    await eventually(
      async () =>
        (await suite.call('GET', `/v1/workspaces/${owner.workspaceId}/webhooks/${hook.json.webhook_id}/deliveries`, auth)).json.data[0]?.status === 'exhausted',
      'the delivery exhausted',
    );

    const dashboard = await openDashboard(suite, '/app/');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    expect(new URL(page.url()).pathname).toBe('/app/overview');
    // The starting credit of 1.00 less 0.42, to cents; this month's spend and today's requests.
    await expect.poll(() => page.getByTestId('overview-balance').innerText()).toBe('$0.58');
    expect(await page.getByTestId('overview-month-spend').innerText()).toBe('$0.42');
    expect(await page.getByTestId('overview-requests-today').innerText()).toBe('2');
    const keys = page.getByRole('region', { name: 'Keys near their caps' });
    await keys.getByRole('row', { name: /Nightly batch/ }).waitFor();
    expect(await keys.getByRole('row', { name: /Nightly batch/ }).innerText()).toContain('$0.21 of $0.25 · 84%');
    expect(await keys.getByRole('row', { name: /Website/ }).count()).toBe(0);
    const failing = page.getByRole('region', { name: 'Failing webhook deliveries' });
    const delivery = failing.getByRole('row', { name: /webhook\.test/ });
    await delivery.waitFor();
    expect(await delivery.innerText()).toMatch(/Order system\s+exhausted\s+3 · last: http/);
    await checkPage(dashboard, 'overview');

    await delivery.getByRole('link', { name: 'Order system' }).click();
    await expectHeading(page, 'Webhook endpoint');
    await dashboard.context.close();
  });
});
