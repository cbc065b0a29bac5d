import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { signUp } from '@switchboard/testkit/mesh';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteOfFile, expectHeading, input, invalidFieldText, openDashboard, signInThroughUi } from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The Keys pages in Chromium against the real mesh: a key is created and its full key shown
 * once, renamed, capped (its month's budget), its spend (recorded by billing as the data plane would) drawn against
 * the cap, its spend alerts and routing set, and revoked; a developer changes only their own keys.
 */

const suite = dashboardSuiteOfFile();
let usage: ReturnType<typeof meshClient<typeof UsageService>>;

beforeAll(() => {
  usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
});

describe('the Keys pages', () => {
  it('create a key shown once, then rename, cap, alert, route and revoke it, with its spend against the cap', async () => {
    const user = await signUp(suite.call);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await dashboard.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: suite.mesh.gatewayUrl });
    await signInThroughUi(page, user.email, user.password);
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Keys' }).click();
    await expectHeading(page, 'API keys');
    await page.getByText('No keys yet').waitFor();
    await checkPage(dashboard, 'keys-empty');

    // The API's error is shown at the field it names.
    await input(page, 'name').fill('Production');
    await input(page, 'monthly_spend_cap_usd').fill('-5');
    await page.getByRole('button', { name: 'Create key' }).click();
    // The API names the field monthly_spend_cap_usd; the page names it by its label.
    const capError = await invalidFieldText(page, 'monthly_spend_cap_usd');
    expect(capError).toMatch(/^Monthly spend cap in USD /m);
    expect(capError).not.toContain('monthly_spend_cap_usd');
    await checkPage(dashboard, 'keys-invalid');
    await input(page, 'monthly_spend_cap_usd').fill('');
    await page.getByRole('button', { name: 'Create key' }).click();

    // The full key, once, with its warning and a Copy button that fills the clipboard.
    const secret = page.getByLabel('Your new API key');
    const fullKey = await secret.inputValue();
    expect(fullKey).toMatch(/^sb_[A-Za-z0-9]{49}$/);
    expect(await page.locator('.copy-once .warning').innerText()).toContain('Shown only once.');
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    expect(
      await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()),
    ).toBe(fullKey);
    const row = page.getByRole('row', { name: /Production/ });
    await row.waitFor();
    await checkPage(dashboard, 'keys-created');
    // It is a working key.
    expect((await suite.call('GET', '/v1/keys', { token: fullKey })).status).toBe(200);

    // Once dismissed, and after the list is loaded again, only its hint is left.
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByLabel('Show').selectOption('active');
    await page.getByLabel('Show').selectOption('');
    await row.waitFor();
    expect(await page.content()).not.toContain(fullKey);
    expect(await row.locator('code').innerText()).toBe(`sb_…${fullKey.slice(-4)}`);
    expect(await row.innerText()).toContain('active');

    await row.getByRole('link', { name: 'Production' }).click();
    await expectHeading(page, 'Key Production');
    const { key_id: keyId } = (await suite.call('GET', '/v1/keys', { token: user.token })).json.data[0];

    await input(page, 'name').fill('Production EU');
    await page.getByRole('button', { name: 'Rename' }).click();
    await expectHeading(page, 'Key Production EU');

    // The month's budget is the key's monthly cap.
    await input(page, 'spend_limits.month.amount_usd').fill('0.50');
    await page.getByRole('button', { name: 'Save budgets' }).click();
    await page.getByText('The budgets are saved.').waitFor();

    // 0.21 USD of passthrough usage (0.20 plus the 5% markup), recorded the way the data plane does.
    await usage.recordUsage({
      generationId: `gen_dashboard_${Date.now().toString(36)}`,
      keyId,
      workspaceId: user.workspaceId,
      model: 'acme/large',
      upstreamCostUsd: '0.2',
      inputTokens: 1000n,
      outputTokens: 500n,
    });
    await eventually(
      async () => (await suite.call('GET', `/v1/keys/${keyId}`, { token: user.token })).json.month_to_date_spend_usd === '0.21',
      'the key spend',
    );

    // Alerts: a URL the API refuses is shown at its field; a good one returns its signing secret, once.
    await input(page, 'url').fill('http://alerts.example.com/hook');
    await page.getByRole('button', { name: 'Turn on alerts' }).click();
    expect(await invalidFieldText(page, 'url')).toContain('https://');
    await input(page, 'url').fill('https://alerts.example.com/hook');
    await input(page, 'thresholds_pct').fill('75, 100');
    await page.getByRole('button', { name: 'Turn on alerts' }).click();
    const signingSecret = await page.getByLabel('Signing secret of the alert webhook').inputValue();
    expect(signingSecret).toMatch(/^whsec_/);
    await page.getByText('Alerts go to https://alerts.example.com/hook when').waitFor();

    await input(page, 'routing_policy').selectOption('cn-only');
    await page.getByRole('button', { name: 'Save routing' }).click();
    await page.getByText('The routing policy is saved.').waitFor();
    expect(await page.getByRole('region', { name: 'Routing' }).innerText()).toContain('Only models hosted in China');
    // The spend recorded meanwhile, shown against the cap.
    const overview = page.getByRole('region', { name: 'Overview' });
    await expect.poll(() => overview.locator('.spend').innerText()).toContain('$0.21 of $0.50');
    await checkPage(dashboard, 'key');

    // The list draws the bar: 42% of the cap.
    await page.getByRole('link', { name: 'All keys' }).click();
    await expectHeading(page, 'API keys');
    const listed = page.getByRole('row', { name: /Production EU/ });
    expect(await listed.locator('.spend').innerText()).toContain('$0.21 of $0.50 · 42%');
    expect(await listed.locator('.spend-bar-fill').evaluate((bar) => (bar as unknown as { style: { width: string } }).style.width)).toMatch(/^42(\.\d+)?%$/);
    expect(await listed.innerText()).toContain('Only models hosted in China');
    await checkPage(dashboard, 'keys');

    // Revoked after a confirmation: refused by the API, read-only here.
    await listed.getByRole('link', { name: 'Production EU' }).click();
    await expectHeading(page, 'Key Production EU');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('Programs using it stop working at once.').waitFor();
    await page.getByRole('button', { name: 'Yes, revoke it' }).click();
    await page.getByText('A revoked key is refused everywhere').waitFor();
    expect(await page.getByRole('button', { name: 'Rename' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /Revoke/ }).count()).toBe(0);
    await checkPage(dashboard, 'key-revoked');
    await eventually(async () => (await suite.call('GET', '/v1/keys', { token: fullKey })).status === 401, 'the revoked key to be refused');
    await dashboard.context.close();
  });

  it("let a developer change only the keys they created, and see others' read-only", async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { orgId, name } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);
    const created = await suite.call('POST', '/v1/keys', { token: owner.token, headers: { 'x-workspace-id': orgId }, body: { name: 'Owner key' } });
    expect(created.status, created.text).toBe(201);

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, developer.email, developer.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: name });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: developer');
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Keys' }).click();
    await expectHeading(page, 'API keys');

    await page.getByRole('link', { name: 'Owner key' }).click();
    await expectHeading(page, 'Key Owner key');
    await page.getByText("Only the key's creator, or an owner or admin of the workspace, can change it; your role is developer.").waitFor();
    for (const control of [
      'Rename',
      'Save scopes',
      'Save expiry',
      'Save models',
      'Save rate limits',
      'Save budgets',
      'Turn on alerts',
      'Save routing',
      'Rotate key',
      'Revoke key',
    ]) {
      expect(await page.getByRole('button', { name: control }).count(), control).toBe(0);
    }
    await checkPage(dashboard, 'key-read-only');

    // Their own key is theirs to change.
    await page.getByRole('link', { name: 'All keys' }).click();
    await input(page, 'name').fill('Developer key');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('link', { name: 'Settings of Developer key' }).click();
    await expectHeading(page, 'Key Developer key');
    await input(page, 'name').fill('Developer key 2');
    await page.getByRole('button', { name: 'Rename' }).click();
    await expectHeading(page, 'Key Developer key 2');
    expect(await page.getByRole('button', { name: 'Revoke key' }).count()).toBe(1);
    await checkPage(dashboard, 'key-own');
    await dashboard.context.close();
  });
});
