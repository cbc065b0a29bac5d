import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { meshClient } from '@switchboard/runtime/testing';
import { signUp } from '@switchboard/testkit/mesh';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteOfFile, expectHeading, goWithinApp, input, invalidFieldText, openDashboard, signInThroughUi } from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The Billing page in Chromium against the real mesh: balance, usage per day stacked by tier,
 * the plan; a top-up paid on the sandbox's page, whose link leads back to this page, signed in
 * (the session cookie), on the origin the user came from, in the workspace of the top-up; a lost answer retried with the same idempotency key pays once; a
 * developer reads billing but gets no top-up or webhook controls.
 */

const suite = dashboardSuiteOfFile();
let usage: ReturnType<typeof meshClient<typeof UsageService>>;

beforeAll(() => {
  usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
});

const nav = (page: import('playwright-core').Page) => page.getByRole('navigation', { name: 'Dashboard' });

describe('the Billing page', () => {
  it('shows usage by tier, and tops up through the sandbox, paying once, back on this page signed in, on the same origin, in the same workspace', async () => {
    const owner = await signUp(suite.call);
    const organization = `Billing ${Date.now().toString(36)}`;
    const created = await suite.call('POST', '/v1/organizations', { token: owner.token, body: { name: organization } });
    expect(created.status, created.text).toBe(201);
    const orgId: string = created.json.organization.org_id;
    const inOrg = { token: owner.token, headers: { 'x-workspace-id': orgId } };
    const key = await suite.call('POST', '/v1/keys', { ...inOrg, body: { name: 'usage' } });
    expect(key.status, key.text).toBe(201);
    // Today's usage in two tiers: 0.0003 (fast) and 0.21 (passthrough: 0.20 plus the 5% markup).
    const generation = `gen_billing_${Date.now().toString(36)}`;
    const recorded = { keyId: key.json.key.key_id, workspaceId: orgId, inputTokens: 1000n, outputTokens: 500n };
    await usage.recordUsage({ ...recorded, generationId: `${generation}_1`, model: 'service/fast' });
    await usage.recordUsage({ ...recorded, generationId: `${generation}_2`, model: 'acme/large', upstreamCostUsd: '0.2' });

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: organization });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: owner');
    await nav(page).getByRole('link', { name: 'Billing' }).click();
    await expectHeading(page, 'Billing');
    // The headline balance to cents, the exact amount in its title.
    await expect.poll(() => page.getByTestId('balance').innerText()).toBe('$0.79');
    expect(await page.getByTestId('balance').locator('.money').getAttribute('title')).toBe('$0.7897 exactly');
    const usageRegion = page.getByRole('region', { name: 'Usage' });
    await usageRegion.getByText('$0.2103 over the last 30 days').waitFor();
    // One day, stacked: a bar per tier used.
    await expect.poll(() => usageRegion.locator('.usage-chart .recharts-bar-rectangle').count()).toBe(2);
    expect(await usageRegion.getByRole('row', { name: /Passthrough/ }).innerText()).toMatch(/1\s+\$0\.21$/);
    expect(await usageRegion.getByRole('row', { name: /^Fast/ }).innerText()).toMatch(/1\s+\$0\.0003$/);
    await page.getByRole('region', { name: 'Plan' }).getByText('Pay as you go').waitFor();
    await page.getByText('No top-ups yet').waitFor();
    await checkPage(dashboard, 'billing');

    await input(page, 'amount_usd').fill('0');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    // The API names the field amount_usd; the page names it by its label.
    expect(await invalidFieldText(page, 'amount_usd')).toContain('Amount in USD must be greater than 0.');

    // The first answer is lost on its way back (the API did start the checkout); the retry gets the same one.
    await page.route('**/v1/billing/topup', async (route) => {
      await route.fetch();
      await route.abort('failed');
    });
    await input(page, 'amount_usd').fill('5.00');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    await page.getByText('The server could not be reached').waitFor();
    await page.unroute('**/v1/billing/topup');
    const started = (await suite.call('GET', '/v1/billing/topups', inOrg)).json.data;
    expect(started).toEqual([expect.objectContaining({ amount_usd: '5.00', status: 'pending' })]);
    const lost = dashboard.problems.filter((problem) => problem.includes('ERR_FAILED'));
    expect(lost).toEqual([expect.stringContaining('/v1/billing/topup'), expect.stringContaining('ERR_FAILED')]);
    dashboard.problems.splice(0, dashboard.problems.length, ...dashboard.problems.filter((problem) => !lost.includes(problem)));

    // The sandbox's page, on this origin (the mesh's PUBLIC_BASE_URL says localhost, the dashboard is on 127.0.0.1).
    const origin = new URL(page.url()).origin;
    expect(new URL(started[0].checkout_url).origin).not.toBe(origin);
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    await page.waitForURL(`${origin}${new URL(started[0].checkout_url).pathname}`);
    expect((await suite.call('GET', '/v1/billing/topups', inOrg)).json.data).toHaveLength(1);

    // Pay, then its link leads back, still signed in: the refresh token is in an HttpOnly cookie the page's script never sees.
    await page.locator('#pay-button').click();
    await page.locator('#status', { hasText: 'completed' }).waitFor();
    await page.getByRole('link', { name: 'Back to billing' }).click();
    await expectHeading(page, 'Billing');
    expect(new URL(page.url()).origin).toBe(origin);
    expect(new URL(page.url()).pathname).toBe('/app/billing');
    // The only cookie: for the refresh path of this origin (its host), never readable by the page.
    const cookies = await dashboard.context.cookies();
    expect(cookies).toEqual([expect.objectContaining({ name: 'sb_refresh', path: '/v1/auth/refresh', httpOnly: true, sameSite: 'Strict', secure: false })]);
    expect(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie)).toBe('');
    // Back in the workspace of the top-up, not the personal one the sign-in opens.
    await expect.poll(() => page.getByLabel('Workspace', { exact: true }).inputValue()).toBe(orgId);
    await page.getByText('Paid: $5.00 was added to the balance.').waitFor();
    await expect.poll(() => page.getByTestId('balance').innerText()).toBe('$5.79');
    const topup = page.getByRole('region', { name: 'Top-ups' }).getByRole('row', { name: /\$5\.00/ });
    expect(await topup.innerText()).toContain('completed');
    expect(new URL(page.url()).search).toBe(`?checkout_id=${started[0].checkout_id}`);
    await checkPage(dashboard, 'billing-topped-up');

    // A reload keeps the user signed in, on this page.
    await page.reload();
    await expectHeading(page, 'Billing');
    await expect.poll(() => page.getByTestId('balance').innerText()).toBe('$5.79');
    expect(await page.locator('.user-email').innerText()).toBe(owner.email);
    await dashboard.context.close();
  });

  it('lets a developer read billing, without top-up or webhook controls', async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { orgId, name } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);
    const pending = await suite.call('POST', '/v1/billing/topup', {
      token: owner.token,
      headers: { 'x-workspace-id': orgId },
      body: { amount_usd: '12.50', idempotency_key: `developer-view-${Date.now()}` },
    });
    expect(pending.status, pending.text).toBe(201);

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, developer.email, developer.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: name });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: developer');
    expect(await nav(page).getByRole('link').allInnerTexts()).not.toContain('Webhooks');
    // The overview shows what the role reads: money and keys, no webhook deliveries.
    await nav(page).getByRole('link', { name: 'Overview' }).click();
    await expectHeading(page, 'Overview');
    await page.getByRole('region', { name: 'Keys near their caps' }).waitFor();
    await expect.poll(() => page.getByTestId('overview-balance').innerText()).toBe('$1.00');
    expect(await page.getByRole('region', { name: 'Failing webhook deliveries' }).count()).toBe(0);
    await checkPage(dashboard, 'overview-developer');

    await goWithinApp(page, '/app/billing');
    await expectHeading(page, 'Billing');
    await page.getByText(`Your role in ${name} (developer) does not allow top-ups.`).waitFor();
    await expect.poll(() => page.getByTestId('balance').innerText()).toBe('$1.00');
    const row = page.getByRole('region', { name: 'Top-ups' }).getByRole('row', { name: /\$12\.50/ });
    expect(await row.innerText()).toContain('pending');
    expect(await input(page, 'amount_usd').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Continue to payment' }).count()).toBe(0);
    expect(await row.getByRole('link').count()).toBe(0);
    await checkPage(dashboard, 'billing-developer');

    await goWithinApp(page, '/app/webhooks');
    await expectHeading(page, 'Not available');
    expect(await page.getByRole('button').allInnerTexts()).toEqual(['Sign out']);
    await dashboard.context.close();
  });
});
