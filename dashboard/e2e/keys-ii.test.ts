import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { type SignedUp, signUp } from '@switchboard/testkit/mesh';
import type { Locator, Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  checkPage,
  dashboardSuiteOfFile,
  expectHeading,
  goWithinApp,
  input,
  invalidFieldText,
  openDashboard,
  settles,
  signInThroughUi,
} from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The key page's Keys II settings in Chromium against the real mesh (docs/api/keys.md): scopes,
 * expiry, allowed models, rate limits, periodic budgets with the spend of each period, alert
 * thresholds, each saved and read back from the API, and each 400 focusing the input its
 * `field` names; rotation showing the new key once; the workspace budgets on the billing page,
 * changed by an owner and only read by a developer.
 */

const suite = dashboardSuiteOfFile();
let usage: ReturnType<typeof meshClient<typeof UsageService>>;

beforeAll(() => {
  usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
});

/** The `name` of the element that has the focus (an input, or the scopes' fieldset). */
function focusedName(page: Page): Promise<string | null> {
  return page.evaluate(
    () =>
      (globalThis as unknown as { document: { activeElement: { getAttribute(name: string): string | null } | null } }).document.activeElement?.getAttribute(
        'name',
      ) ?? null,
  );
}

/** Clicks `button` of `section` and waits until the 400 it gets focuses the input `field`; returns the input's error text. */
async function submitExpectingFieldError(page: Page, section: Locator, button: string, field: string): Promise<string> {
  await section.getByRole('button', { name: button }).click();
  const text = await invalidFieldText(section, field);
  await expect.poll(() => focusedName(page)).toBe(field);
  return text;
}

/** The key as the API has it now. */
async function keyOf(user: SignedUp, keyId: string) {
  const answer = await suite.call('GET', `/v1/keys/${keyId}`, { token: user.token });
  expect(answer.status, answer.text).toBe(200);
  return answer.json;
}

/** A datetime-local value `days` from now and the instant the browser reads it as (the reader's local time). */
function localTimeIn(page: Page, days: number): Promise<{ value: string; iso: string }> {
  return page.evaluate((ahead) => {
    const date = new Date(Date.now() + ahead * 86_400_000);
    date.setSeconds(0, 0);
    const value = new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    return { value, iso: new Date(value).toISOString() };
  }, days);
}

describe('the key page (Keys II)', () => {
  it('edits scopes, expiry, allowed models, rate limits, budgets and thresholds, each 400 at its input, and rotates showing the new key once', async () => {
    const user = await signUp(suite.call);
    const created = await suite.call('POST', '/v1/keys', { token: user.token, body: { name: 'Backend' } });
    expect(created.status, created.text).toBe(201);
    const keyId: string = created.json.key.key_id;
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    await goWithinApp(page, `/app/keys/${keyId}`);
    await expectHeading(page, 'Key Backend');
    const overview = page.getByRole('region', { name: 'Overview' });
    await overview.getByText('Inference, Read, Manage').waitFor();

    // Scopes: none ticked is the API's 400 on `scopes`, shown and focused on the group; then inference and read.
    const scopes = page.getByRole('region', { name: 'Scopes' });
    const box = (name: string) => scopes.getByRole('checkbox', { name: new RegExp(`^${name}`) });
    for (const name of ['Inference', 'Read', 'Manage']) await box(name).uncheck();
    await submitExpectingFieldError(page, scopes, 'Save scopes', 'scopes');
    await box('Inference').check();
    await box('Read').check();
    await scopes.getByRole('button', { name: 'Save scopes' }).click();
    await scopes.getByText('The scopes are saved.').waitFor();
    expect((await keyOf(user, keyId)).scopes).toEqual(['inference', 'read']);
    await expect.poll(() => page.getByTestId('key-scopes').innerText()).toBe('Inference, Read');

    // Expiry: a past time is a 400 on `expires_at`; a future one is saved as that instant; "Never expire" clears it.
    const expiry = page.getByRole('region', { name: 'Expiry' });
    const past = await localTimeIn(page, -1);
    await input(expiry, 'expires_at').fill(past.value);
    await submitExpectingFieldError(page, expiry, 'Save expiry', 'expires_at');
    const future = await localTimeIn(page, 30);
    await input(expiry, 'expires_at').fill(future.value);
    await expiry.getByRole('button', { name: 'Save expiry' }).click();
    await expiry.getByText('The key now expires on').waitFor();
    expect(new Date((await keyOf(user, keyId)).expires_at).toISOString()).toBe(future.iso);
    await expect.poll(() => page.getByTestId('key-expiry').innerText()).toContain('The key expires on');

    // Allowed models: a pattern over 200 characters on the second line is a 400 naming that line, at the textarea.
    const models = page.getByRole('region', { name: 'Allowed models' });
    await input(models, 'allowed_models').fill(`service/*\n${'x'.repeat(201)}`);
    expect(await submitExpectingFieldError(page, models, 'Save models', 'allowed_models')).toContain('Line 2 of allowed models');
    await input(models, 'allowed_models').fill('service/*\n\nacme/large\n');
    await models.getByRole('button', { name: 'Save models' }).click();
    await models.getByText('The allowed models are saved.').waitFor();
    expect((await keyOf(user, keyId)).allowed_models).toEqual(['service/*', 'acme/large']);
    await expect.poll(() => page.getByTestId('allowed-models').innerText()).toBe('service/*\nacme/large');

    // Rate limits: 0 is a 400 on rate_limits.requests_per_minute; three numbers are saved; an empty one is none.
    const limits = page.getByRole('region', { name: 'Rate limits' });
    await input(limits, 'rate_limits.requests_per_minute').fill('0');
    expect(await submitExpectingFieldError(page, limits, 'Save rate limits', 'rate_limits.requests_per_minute')).toMatch(/^Requests per minute /m);
    await input(limits, 'rate_limits.requests_per_minute').fill('60');
    await input(limits, 'rate_limits.tokens_per_minute').fill('100000');
    await input(limits, 'rate_limits.max_concurrent').fill('4');
    await limits.getByRole('button', { name: 'Save rate limits' }).click();
    await limits.getByText('The rate limits are saved.').waitFor();
    expect((await keyOf(user, keyId)).rate_limits).toEqual({ requests_per_minute: 60, tokens_per_minute: 100000, max_concurrent: 4 });
    await input(limits, 'rate_limits.tokens_per_minute').fill('');
    await limits.getByRole('button', { name: 'Save rate limits' }).click();
    await expect
      .poll(async () => (await keyOf(user, keyId)).rate_limits, settles)
      .toEqual({ requests_per_minute: 60, tokens_per_minute: null, max_concurrent: 4 });
    await expect.poll(() => page.getByTestId('rate-limits').innerText()).not.toContain('Tokens per minute');

    // Budgets: the week's amount is the second entry sent (the day's is first), so the API's spend_limits[1].amount_usd is the week's input.
    const budgets = page.getByRole('region', { name: 'Budgets' });
    await input(budgets, 'spend_limits.day.amount_usd').fill('5.00');
    await input(budgets, 'spend_limits.week.amount_usd').fill('-1');
    expect(await submitExpectingFieldError(page, budgets, 'Save budgets', 'spend_limits.week.amount_usd')).toMatch(/^Weekly budget in USD /m);
    await checkPage(dashboard, 'keys-budgets-invalid');
    await input(budgets, 'spend_limits.week.amount_usd').fill('');
    await input(budgets, 'spend_limits.month.amount_usd').fill('100.00');
    await input(budgets, 'spend_limits.total.amount_usd').fill('1000');
    await budgets.getByRole('button', { name: 'Save budgets' }).click();
    await budgets.getByText('The budgets are saved.').waitFor();
    const budgeted = await keyOf(user, keyId);
    expect(budgeted.spend_limits.map(({ period, amount_usd }: { period: string; amount_usd: string }) => [period, amount_usd])).toEqual([
      ['day', '5.00'],
      ['month', '100.00'],
      ['total', '1000'],
    ]);
    // The month's budget is the monthly cap.
    expect(budgeted.monthly_spend_cap_usd).toBe('100.00');

    // 0.21 USD of usage (0.20 plus the 5% markup), recorded as the data plane does: each period shows it, what is left and when it resets.
    await usage.recordUsage({
      generationId: `gen_keys_ii_${Date.now().toString(36)}`,
      keyId,
      workspaceId: user.workspaceId,
      model: 'acme/large',
      upstreamCostUsd: '0.2',
      inputTokens: 1000n,
      outputTokens: 500n,
    });
    await eventually(
      async () => (await keyOf(user, keyId)).spend_limits.every((limit: { spend_usd: string }) => limit.spend_usd === '0.21'),
      'the spend of every period',
    );
    await page.reload();
    await expectHeading(page, 'Key Backend');
    const dayRow = page.getByRole('region', { name: 'Budgets' }).locator('tr[data-period="day"]');
    await expect.poll(() => dayRow.innerText(), settles).toContain('$0.21');
    expect(await dayRow.innerText()).toContain('$4.79');
    const tomorrow = new Date();
    tomorrow.setUTCHours(24, 0, 0, 0);
    expect(new Date((await keyOf(user, keyId)).spend_limits[0].resets_at).getTime()).toBe(tomorrow.getTime());
    expect(await page.getByRole('region', { name: 'Budgets' }).locator('tr[data-period="total"]').innerText()).toContain('Never');

    // Alert thresholds: a repeated percent is the API's 400 at the thresholds' input; three are saved, in order.
    const alerts = page.getByRole('region', { name: 'Spend alerts' });
    await input(alerts, 'url').fill('https://alerts.example.com/hook');
    await input(alerts, 'thresholds_pct').fill('50, 50');
    await submitExpectingFieldError(page, alerts, 'Turn on alerts', 'thresholds_pct');
    await input(alerts, 'thresholds_pct').fill('50, 80, 100');
    await alerts.getByRole('button', { name: 'Turn on alerts' }).click();
    expect(await page.getByLabel('Signing secret of the alert webhook').inputValue()).toMatch(/^whsec_/);
    expect((await keyOf(user, keyId)).alert_thresholds_pct).toEqual([50, 80, 100]);
    await expect.poll(() => page.getByTestId('alert-thresholds').innerText()).toBe('50%, 80% and 100%');
    await checkPage(dashboard, 'keys-settings');

    // Rotation with a grace period of one hour: the new full key, once; the old key expires then.
    const rotate = page.getByRole('region', { name: 'Rotate the key' });
    await input(rotate, 'grace_period_seconds').selectOption('3600');
    const before = Date.now();
    await rotate.getByRole('button', { name: 'Rotate key' }).click();
    const fullKey = await rotate.getByLabel('Your new API key').inputValue();
    expect(fullKey).toMatch(/^sb_[A-Za-z0-9]{49}$/);
    expect(await rotate.locator('.copy-once .warning').innerText()).toContain('The old key keeps working until');
    const previous = await keyOf(user, keyId);
    const graceEnd = new Date(previous.expires_at).getTime();
    expect(graceEnd).toBeGreaterThanOrEqual(before + 3600_000 - 5_000);
    expect(graceEnd).toBeLessThanOrEqual(Date.now() + 3600_000 + 5_000);
    // This page's expiry input now holds the end of the grace period.
    const graceEndLocal = await page.evaluate((iso) => {
      const date = new Date(iso);
      return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    }, previous.expires_at as string);
    await expect.poll(() => input(expiry, 'expires_at').inputValue()).toBe(graceEndLocal);
    // Both keys work during the grace period.
    expect((await suite.call('GET', '/v1/keys', { token: fullKey })).status).toBe(200);
    await checkPage(dashboard, 'keys-rotated');

    await rotate.getByRole('link', { name: /^Settings of the new key/ }).click();
    await expect.poll(() => page.getByRole('region', { name: 'Overview' }).getByText('Rotated from').count()).toBe(1);
    const newKeyId = page.url().split('/').at(-1) as string;
    const rotated = await keyOf(user, newKeyId);
    expect(rotated).toMatchObject({
      name: 'Backend',
      rotated_from: keyId,
      scopes: ['inference', 'read'],
      allowed_models: ['service/*', 'acme/large'],
      rate_limits: { requests_per_minute: 60, tokens_per_minute: null, max_concurrent: 4 },
      alert_thresholds_pct: [50, 80, 100],
    });
    // The new key keeps the expiry the old one had before the rotation.
    expect(new Date(rotated.expires_at).toISOString()).toBe(future.iso);
    // One budget, two credentials: the new key's periods carry the old one's spend.
    expect(rotated.spend_limits.map(({ spend_usd }: { spend_usd: string }) => spend_usd)).toEqual(['0.21', '0.21', '0.21']);
    // Shown once: gone from every page once left.
    expect(await page.content()).not.toContain(fullKey);
    await page.getByRole('link', { name: 'the previous key' }).click();
    await expectHeading(page, 'Key Backend');
    await page.getByRole('region', { name: 'Rotate the key' }).getByRole('button', { name: 'Rotate key' }).waitFor();
    expect(await page.content()).not.toContain(fullKey);
    await dashboard.context.close();
  }, 120_000);

  it('creates an inference-only key: the scopes ticked on the create form, none ticked a 400 at the group', async () => {
    const user = await signUp(suite.call);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    await goWithinApp(page, '/app/keys');
    await expectHeading(page, 'API keys');
    const create = page.getByRole('region', { name: 'Create a key' });
    const box = (name: string) => create.getByRole('checkbox', { name: new RegExp(`^${name}`) });
    await input(create, 'name').fill('Inference only');
    for (const name of ['Inference', 'Read', 'Manage']) await box(name).uncheck();
    await submitExpectingFieldError(page, create, 'Create key', 'scopes');
    await box('Inference').check();
    await create.getByRole('button', { name: 'Create key' }).click();
    const fullKey = await create.getByLabel('Your new API key').inputValue();
    const listed = (await suite.call('GET', '/v1/keys', { token: user.token })).json.data[0];
    expect(listed).toMatchObject({ name: 'Inference only', scopes: ['inference'] });
    // The list says a key's scopes when it has not all three.
    await expect.poll(() => page.getByRole('row', { name: /Inference only/ }).innerText()).toContain('Scopes: Inference');
    await checkPage(dashboard, 'keys-created-inference-only');
    // What the scope allows, and what it does not.
    expect((await suite.call('GET', '/v1/key', { token: fullKey })).status).toBe(200);
    const refused = await suite.call('GET', '/v1/keys', { token: fullKey });
    expect([refused.status, refused.json.error.code]).toEqual([403, 'insufficient_scope']);
    await dashboard.context.close();
  });

  it('sets the workspace budgets on the billing page for an owner, and shows them read-only to a developer', async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { orgId, name } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: name });
    await goWithinApp(page, '/app/billing');
    await expectHeading(page, 'Billing');
    const budgets = page.getByRole('region', { name: 'Workspace budgets' });
    await budgets.getByText('No workspace budgets').waitFor();

    // Only the total's is filled: it is spend_limits[0], the API's 400 is at the total's input.
    await input(budgets, 'spend_limits.total.amount_usd').fill('12e3');
    expect(await submitExpectingFieldError(page, budgets, 'Save budgets', 'spend_limits.total.amount_usd')).toMatch(/^Total budget in USD /m);
    await input(budgets, 'spend_limits.total.amount_usd').fill('');
    await input(budgets, 'spend_limits.week.amount_usd').fill('200');
    await input(budgets, 'spend_limits.month.amount_usd').fill('500.00');
    await budgets.getByRole('button', { name: 'Save budgets' }).click();
    await budgets.getByText('The workspace budgets are saved.').waitFor();
    const inOrg = { token: owner.token, headers: { 'x-workspace-id': orgId } };
    const saved = (await suite.call('GET', '/v1/billing/spend-limits', inOrg)).json.spend_limits;
    expect(
      saved.map(({ period, amount_usd, spend_usd }: { period: string; amount_usd: string; spend_usd: string }) => [period, amount_usd, spend_usd]),
    ).toEqual([
      ['week', '200', '0'],
      ['month', '500.00', '0'],
    ]);
    await expect.poll(() => budgets.locator('tr[data-period="month"]').innerText()).toContain('$500.00');
    await checkPage(dashboard, 'billing-budgets');
    await dashboard.context.close();

    const readOnly = await openDashboard(suite, '/app/sign-in');
    await signInThroughUi(readOnly.page, developer.email, developer.password);
    await readOnly.page.getByLabel('Workspace', { exact: true }).selectOption({ label: name });
    await expect.poll(() => readOnly.page.locator('.role').innerText()).toBe('Role: developer');
    await goWithinApp(readOnly.page, '/app/billing');
    await expectHeading(readOnly.page, 'Billing');
    const shown = readOnly.page.getByRole('region', { name: 'Workspace budgets' });
    await expect.poll(() => shown.locator('tr[data-period="week"]').innerText()).toContain('$200.00');
    await shown.getByText(`Your role in ${name} (developer) does not allow changing the budgets.`, { exact: false }).waitFor();
    expect(await shown.locator('input, button').count()).toBe(0);
    await checkPage(readOnly, 'billing-budgets-developer');
    await readOnly.context.close();
  }, 60_000);
});
