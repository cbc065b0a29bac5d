import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { meshClient } from '@switchboard/runtime/testing';
import { type RestCall, signUp, topUp } from '@switchboard/testkit/mesh';
import type { Locator, Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { cardExpiry, cardLabel } from '../src/pages/billing/ledger-words.js';
import { monthOf } from '../src/pages/billing/months.js';
import { checkPage, dashboardSuiteOfFile, expectHeading, goWithinApp, input, invalidFieldText, openDashboard, signInThroughUi } from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The Billing page in Chromium against the real mesh: balance, usage per day stacked by tier,
 * the plan; a top-up paid on the sandbox's page, whose link leads back to this page, signed in
 * (the session cookie), on the origin the user came from, in the workspace of the top-up; a lost answer retried with the same idempotency key pays once; a
 * card saved on the sandbox's setup page, auto top-up charging it at once when saved below its
 * threshold, the ledger a page at a time and the month's statement, the card removed (auto top-up
 * goes off, in words); a developer reads billing and the saved cards (not auto top-up), but gets no
 * top-up, card, auto top-up or webhook controls.
 */

const suite = dashboardSuiteOfFile();
let usage: ReturnType<typeof meshClient<typeof UsageService>>;

beforeAll(() => {
  usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
});

const nav = (page: Page) => page.getByRole('navigation', { name: 'Dashboard' });

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

    // The auto top-up form has an amount_usd too: the top-up's is the one of "Add funds".
    const addFunds = page.getByRole('region', { name: 'Add funds' });
    await input(addFunds, 'amount_usd').fill('0');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    // The API names the field amount_usd; the page names it by its label.
    expect(await invalidFieldText(addFunds, 'amount_usd')).toContain('Amount in USD must be greater than 0.');

    // The first answer is lost on its way back (the API did start the checkout); the retry gets the same one.
    await page.route('**/v1/billing/topup', async (route) => {
      await route.fetch();
      await route.abort('failed');
    });
    await input(addFunds, 'amount_usd').fill('5.00');
    await page.getByRole('button', { name: 'Continue to payment' }).click();
    await page.getByText('The server could not be reached').waitFor();
    await page.unroute('**/v1/billing/topup');
    const started = (await suite.call('GET', '/v1/billing/topups', inOrg)).json.data;
    expect(started).toEqual([expect.objectContaining({ amount_usd: '5.00', status: 'pending' })]);
    const lost = dashboard.problems.filter((problem) => problem.includes('ERR_FAILED'));
    // The SDK retries a POST with its Idempotency-Key after a lost answer: each attempt is lost here, one top-up all the same.
    expect(lost).toEqual(expect.arrayContaining([expect.stringContaining('/v1/billing/topup'), expect.stringContaining('ERR_FAILED')]));
    dashboard.problems.splice(0, dashboard.problems.length, ...dashboard.problems.filter((problem) => !lost.includes(problem)));

    // The sandbox's page, on this origin: the mesh's PUBLIC_BASE_URL is the address the dashboard is on.
    const origin = new URL(page.url()).origin;
    expect(new URL(started[0].checkout_url).origin).toBe(origin);
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

  it('saves a card on the sandbox page, charges it by auto top-up below the threshold, shows the ledger and the statement, and switches off when the card goes', async () => {
    const owner = await signUp(suite.call);
    const organization = `Auto top-up ${Date.now().toString(36)}`;
    const created = await suite.call('POST', '/v1/organizations', { token: owner.token, body: { name: organization } });
    expect(created.status, created.text).toBe(201);
    const orgId: string = created.json.organization.org_id;
    const inOrg = { token: owner.token, headers: { 'x-workspace-id': orgId } };
    // The test mesh opens every account with a credit of 1.00; today's usage takes 0.0003 (fast).
    const key = await suite.call('POST', '/v1/keys', { ...inOrg, body: { name: 'usage' } });
    expect(key.status, key.text).toBe(201);
    await usage.recordUsage({
      keyId: key.json.key.key_id,
      workspaceId: orgId,
      inputTokens: 1000n,
      outputTokens: 500n,
      generationId: `gen_auto_${Date.now().toString(36)}`,
      model: 'service/fast',
    });
    const today = new Date().toISOString().slice(0, 10);

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: organization });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: owner');
    await nav(page).getByRole('link', { name: 'Billing' }).click();
    await expectHeading(page, 'Billing');
    await expect.poll(() => page.getByTestId('balance').innerText()).toBe('$1.00');
    const methods = page.getByRole('region', { name: 'Payment methods' });
    const autoTopup = page.getByRole('region', { name: 'Auto top-up' });
    const ledger = page.getByRole('region', { name: 'Ledger' });
    const statement = page.getByRole('region', { name: 'Statement' });
    await methods.getByText('No saved cards').waitFor();
    await expect.poll(() => fact(autoTopup, 'Status')).toBe('Off');
    expect(await fact(autoTopup, 'Charged this month (UTC)')).toBe('$0.00');
    // Newest first, each with the balance right after it; usage is one entry per UTC day and tier.
    await expect
      .poll(() => rowTexts(ledger))
      .toEqual([
        ['Usage', '-$0.0003', '$0.9997', `Fast tier, ${today} (UTC)`],
        ['Free credit', '+$1.00', '$1.00', expect.any(String)],
      ]);
    // This month's statement by default: opening + credits − usage − refunds = closing.
    expect(await statement.getByLabel('Month').inputValue()).toBe(monthOf(new Date()));
    await expect.poll(() => fact(statement, 'Closing balance')).toMatch(/^\$0\.9997/);
    expect(await fact(statement, 'Opening balance')).toBe('$0.00');
    expect(await fact(statement, 'Credits')).toMatch(/^\$1\.00 /);
    expect(await fact(statement, 'Usage')).toMatch(/^\$0\.0003 /);
    expect(await fact(statement, 'Refunds')).toMatch(/^\$0\.00 /);
    expect(await statement.getByRole('row', { name: /^Fast/ }).innerText()).toMatch(/\$0\.0003$/);
    expect(await statement.getByRole('row', { name: /^Balanced/ }).innerText()).toMatch(/\$0\.00$/);
    await checkPage(dashboard, 'billing-payments');

    // A field error focuses the input it names.
    await input(autoTopup, 'threshold_usd').fill('0');
    await autoTopup.getByRole('button', { name: 'Save auto top-up' }).click();
    await invalidFieldText(autoTopup, 'threshold_usd');
    await expect.poll(() => focusedName(page)).toBe('threshold_usd');

    // On without a saved card: 422 payment_method_required, shown at the switch, with a way to add a card.
    await input(autoTopup, 'enabled').check();
    await input(autoTopup, 'threshold_usd').fill('5.00');
    await input(autoTopup, 'amount_usd').fill('10.00');
    await input(autoTopup, 'monthly_limit_usd').fill('50.00');
    await input(autoTopup, 'low_balance_threshold_usd').fill('2.00');
    await autoTopup.getByRole('button', { name: 'Save auto top-up' }).click();
    expect(await invalidFieldText(autoTopup, 'enabled')).not.toBe('');
    await expect.poll(() => focusedName(page)).toBe('enabled');
    await page.getByTestId('auto-topup-needs-card').getByRole('button', { name: 'Add a card for auto top-up' }).waitFor();
    expect(await fact(autoTopup, 'Status')).toBe('Off');

    // Add a card: the sandbox's setup page, opened on this origin (the mesh's PUBLIC_BASE_URL is this address).
    const origin = new URL(page.url()).origin;
    const elsewhere = await suite.call('POST', '/v1/billing/payment-methods/setup', { ...inOrg, body: {} });
    expect(elsewhere.status, elsewhere.text).toBe(201);
    expect(new URL(elsewhere.json.setup_url).origin).toBe(origin);
    await methods.getByRole('button', { name: 'Add a card', exact: true }).click();
    await page.waitForURL(new RegExp(`^${origin.replace(/[.]/g, '\\.')}/v1/billing/sandbox/setup/[^/?#]+$`));
    const setupPath = new URL(page.url()).pathname;
    await page.getByText('4242').first().waitFor();
    // Saved as the page's button saves it; then back to billing in the organization.
    const saved = await suite.call('POST', `${setupPath}/complete`, { body: { card: '4242' } });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.json).toMatchObject({ last4: '4242', default: true });
    await page.goto(`${origin}/app/billing?workspace_id=${orgId}`);
    await expectHeading(page, 'Billing');
    const card = cardLabel(saved.json.brand, '4242');
    const row = methods.getByRole('row', { name: new RegExp(card) });
    await expect.poll(() => row.innerText()).toContain(cardExpiry(saved.json.exp_month, saved.json.exp_year));
    expect(await row.innerText()).toContain('Default');

    // Saved on while the balance (0.9997) is below the threshold: the card is charged at once, and the page follows until it is credited.
    await input(autoTopup, 'enabled').check();
    await input(autoTopup, 'threshold_usd').fill('5.00');
    await input(autoTopup, 'amount_usd').fill('10.00');
    await input(autoTopup, 'monthly_limit_usd').fill('50.00');
    await input(autoTopup, 'low_balance_threshold_usd').fill('2.00');
    await autoTopup.getByRole('button', { name: 'Save auto top-up' }).click();
    await autoTopup.getByText('Auto top-up saved.').waitFor();
    await expect.poll(() => fact(autoTopup, 'Status')).toBe('On');
    await expect.poll(() => page.getByTestId('balance').innerText(), { timeout: 30_000 }).toBe('$11.00');
    await expect.poll(() => fact(autoTopup, 'Charged this month (UTC)')).toBe('$10.00');
    expect(await fact(autoTopup, 'Failed charges in a row')).toBe('None');
    expect(await fact(autoTopup, 'Monthly limit')).toBe('$50.00');
    await expect.poll(async () => (await rowTexts(ledger))[0]).toEqual(['Auto top-up', '+$10.00', '$10.9997', expect.any(String)]);
    await expect.poll(() => fact(statement, 'Closing balance')).toMatch(/^\$10\.9997/);
    expect(await fact(statement, 'Credits')).toMatch(/^\$11\.00 /);
    // The form shows what is saved.
    expect(await input(autoTopup, 'threshold_usd').inputValue()).toMatch(/^5(\.00?)?$/);
    await checkPage(dashboard, 'billing-auto-topup');

    // The ledger a page at a time: ten top-ups more make 13 entries.
    await paySandboxTopups(suite.call, inOrg, 10);
    await page.goto(`${origin}/app/billing?workspace_id=${orgId}`);
    await expectHeading(page, 'Billing');
    await expect.poll(async () => (await rowTexts(ledger)).length).toBe(10);
    expect((await rowTexts(ledger))[0].slice(0, 2)).toEqual(['Top-up', '+$1.00']);
    await ledger.getByRole('button', { name: 'Load more entries' }).click();
    await expect
      .poll(async () => (await rowTexts(ledger)).map(([type]) => type))
      .toEqual([...Array.from({ length: 10 }, () => 'Top-up'), 'Auto top-up', 'Usage', 'Free credit']);
    expect(await ledger.getByRole('button', { name: 'Load more entries' }).count()).toBe(0);

    // Removing the only card asks first, then switches auto top-up off, saying why.
    await methods.getByRole('button', { name: `Remove ${card}` }).click();
    await methods.getByText('It is the only saved card').waitFor();
    await methods.getByRole('button', { name: 'Remove', exact: true }).click();
    await methods.getByText('No saved cards').waitFor();
    await expect.poll(() => fact(autoTopup, 'Status')).toBe('Off');
    expect(await page.getByTestId('auto-topup-disabled-reason').innerText()).toBe(
      'Auto top-up was switched off because its card was removed. Save a card, then switch it on again.',
    );
    expect((await suite.call('GET', '/v1/billing/auto-topup', inOrg)).json).toMatchObject({ enabled: false, disabled_reason: 'payment_method_removed' });
    await checkPage(dashboard, 'billing-card-removed');
    await dashboard.context.close();
  }, 120_000);

  it('lets a developer read billing and the saved cards, without top-up, card, auto top-up or webhook controls', async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { orgId, name } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);
    const pending = await suite.call('POST', '/v1/billing/topup', {
      token: owner.token,
      headers: { 'x-workspace-id': orgId },
      body: { amount_usd: '12.50', idempotency_key: `developer-view-${Date.now()}` },
    });
    expect(pending.status, pending.text).toBe(201);
    // A card and auto top-up, set by the owner (threshold below the balance: nothing is charged).
    const inOrg = { token: owner.token, headers: { 'x-workspace-id': orgId } };
    const saved = await saveSandboxCard(suite.call, inOrg);
    const settings = await suite.call('PUT', '/v1/billing/auto-topup', {
      ...inOrg,
      body: { enabled: true, threshold_usd: '0.50', amount_usd: '10.00', monthly_limit_usd: '30.00' },
    });
    expect(settings.status, settings.text).toBe(200);

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
    // Cards, the ledger and the statement read, nothing to change.
    const methods = page.getByRole('region', { name: 'Payment methods' });
    const autoTopup = page.getByRole('region', { name: 'Auto top-up' });
    await expect.poll(() => methods.getByRole('row', { name: new RegExp(cardLabel(saved.brand, saved.last4)) }).innerText()).toContain('Default');
    expect(await methods.getByRole('button').count()).toBe(0);
    // Auto top-up is the managers': the developer is told so, and sees neither its settings nor a control.
    await autoTopup.getByText(`Your role in ${name} (developer) does not allow auto top-up.`, { exact: false }).waitFor();
    expect(await autoTopup.getByRole('button').count()).toBe(0);
    expect(await autoTopup.locator('input, dl').count()).toBe(0);
    await expect.poll(() => rowTexts(page.getByRole('region', { name: 'Ledger' }))).toEqual([['Free credit', '+$1.00', '$1.00', expect.any(String)]]);
    await expect.poll(() => fact(page.getByRole('region', { name: 'Statement' }), 'Closing balance')).toMatch(/^\$1\.00/);
    await checkPage(dashboard, 'billing-developer');

    await goWithinApp(page, '/app/webhooks');
    await expectHeading(page, 'Not available');
    expect(await page.getByRole('button').allInnerTexts()).toEqual(['Sign out']);
    await dashboard.context.close();
  });
});

/** The text of the fact `term` of a `dl.facts` in `scope` (a section). */
async function fact(scope: Locator, term: string): Promise<string> {
  const terms = await scope.locator('dl.facts dt').allInnerTexts();
  const index = terms.indexOf(term);
  if (index < 0) return `no fact "${term}" among ${terms.join(', ')}`;
  return (await scope.locator('dl.facts dd').nth(index).innerText()).trim();
}

/** The cells of each body row of the table in `scope`, after its first (a date, which varies). */
async function rowTexts(scope: Locator): Promise<string[][]> {
  const rows = await scope.locator('table tbody tr').all();
  return Promise.all(rows.map(async (row) => (await row.locator('td').allInnerTexts()).map((text) => text.trim())));
}

/** The name of the element that has the focus. */
function focusedName(page: Page): Promise<string | null | undefined> {
  return page.evaluate(() =>
    (globalThis as unknown as { document: { activeElement: { getAttribute(name: string): string | null } | null } }).document.activeElement?.getAttribute(
      'name',
    ),
  );
}

type InWorkspace = { token: string; headers: Record<string, string> };

/** A sandbox test card saved over REST, as the setup page's button saves it: the payment method. */
async function saveSandboxCard(call: RestCall, inWorkspace: InWorkspace, card = '4242') {
  const setup = await call('POST', '/v1/billing/payment-methods/setup', { ...inWorkspace, body: {} });
  expect(setup.status, setup.text).toBe(201);
  const saved = await call('POST', `${new URL(setup.json.setup_url).pathname}/complete`, { body: { card } });
  expect(saved.status, saved.text).toBe(200);
  return saved.json as { payment_method_id: string; brand: string; last4: string; exp_month: number; exp_year: number };
}

/** `count` top-ups of 1.00, each paid on the sandbox (what its page's Pay button does). */
async function paySandboxTopups(call: RestCall, inWorkspace: InWorkspace, count: number): Promise<void> {
  for (let n = 0; n < count; n++) await topUp(call, inWorkspace.token, '1.00', inWorkspace.headers['x-workspace-id']);
}
