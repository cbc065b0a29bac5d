import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { linksOf, waitForMail } from '@switchboard/testkit/mailbox';
import { type SignedUp, signUp } from '@switchboard/testkit/mesh';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import {
  checkPage,
  dashboardSuiteWithModels,
  expectHeading,
  goWithinApp,
  invalidFieldText,
  openDashboard,
  restAs,
  settles,
  signInThroughUi,
} from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The Usage, Generation, Audit log pages and "Export my data" in Chromium (issue 26), against one
 * mesh and a local OpenAI-compatible upstream: requests through the front door with two keys and
 * two models show in the usage chart and totals by model and by key, and in the CSV the page
 * saves; a generation's detail is reached from the usage page and from its conversation; the
 * audit log lists the key created, for owners only; the export shows it is being prepared.
 */

// Model ids of this run only.
const tag = randomBytes(3).toString('hex');
const MODEL_A = `usage-a-${tag}`;
const MODEL_B = `usage-b-${tag}`;
/** The audit action the log is filtered by (the keys service records it). */
const auditedAction = 'key.created';

const suite = dashboardSuiteWithModels([MODEL_A, MODEL_B]);

const rest = (user: SignedUp, method: string, pathname: string, body?: unknown, status = 201) => restAs(suite, user, method, pathname, body, status);

/** A chat completion through the front door with an API key; answers the generation id. */
async function complete(apiKey: string, model: string, conversationId?: string): Promise<string> {
  const response = await fetch(`${suite.mesh.gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      ...(conversationId ? { 'x-service-conversation-id': conversationId } : {}),
    },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 8 }),
    signal: AbortSignal.timeout(15_000),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return response.headers.get('x-service-generation-id') ?? '';
}

/** The text of each body row of the usage totals, `<group> <requests> …`. */
function totalsRows(page: Page): Promise<string[]> {
  return page.locator('table.usage-totals tbody tr').allInnerTexts();
}

/** Refreshes the usage report and answers its total row ('' while there is no usage). */
async function refreshedTotal(page: Page): Promise<string> {
  await page.getByRole('button', { name: 'Refresh' }).click();
  // The click renders the loading state at once; then the report or its empty state.
  await page.locator('table.usage-totals, .empty, .error-message').first().waitFor();
  const total = page.locator('table.usage-totals tfoot');
  return (await total.count()) > 0 ? total.innerText() : '';
}

/** The value of a fact (`dt` → `dd`) of the page. */
function fact(page: Page, term: string): Promise<string> {
  return page.locator('dl.facts').locator(`dt:text-is("${term}") + dd`).first().innerText();
}

describe('the Usage, Generation and Audit log pages, and the data export', () => {
  it('charts usage by model and by key with exact totals and a CSV, and shows a generation from the usage page and its conversation', async () => {
    const user = await signUp(suite.call);
    const alpha = await rest(user, 'POST', '/v1/keys', { name: 'alpha' });
    const beta = await rest(user, 'POST', '/v1/keys', { name: 'beta' });
    const conversation = await rest(user, 'POST', '/v1/conversations', { title: 'Usage trip' });
    // alpha: two requests of model A (one stored in a conversation); beta: one of model B.
    const inConversation = await complete(alpha.full_key, MODEL_A, conversation.conversation_id);
    await complete(alpha.full_key, MODEL_A);
    const latest = await complete(beta.full_key, MODEL_B);
    await rest(user, 'POST', '/v1/feedback', { generation_id: inConversation, rating: 1, tags: ['accurate'] });

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    const nav = page.getByRole('navigation', { name: 'Dashboard' });

    // The conversation links to the generation of its answer: every field of it, feedback included.
    await nav.getByRole('link', { name: 'Conversations' }).click();
    await page
      .getByRole('navigation', { name: 'Conversations' })
      .getByRole('link', { name: /Usage trip/ })
      .click();
    const generations = page.getByRole('region', { name: 'Generations' });
    await generations.getByRole('link', { name: inConversation }).click();
    await expectHeading(page, 'Generation');
    await expect.poll(() => fact(page, 'Generation id'), settles).toBe(inConversation);
    // The key's name is looked up after the generation.
    await expect.poll(() => fact(page, 'Key'), settles).toContain('alpha');
    expect(await fact(page, 'Model requested')).toBe(MODEL_A);
    expect(await fact(page, 'Model that served')).toBe(MODEL_A);
    expect(await fact(page, 'Conversation')).toBe(conversation.conversation_id);
    expect(await fact(page, 'Output tokens')).toBe('8');
    expect(await fact(page, 'Input tokens')).toMatch(/^[1-9]\d*$/);
    expect(await fact(page, 'Cost')).toMatch(/^\$0\.\d+$/);
    expect(await fact(page, 'Status')).toBe('completed');
    expect(await fact(page, 'Latency')).toMatch(/^\d+ ms$/);
    await expect
      .poll(async () => {
        // Feedback reaches billing through an event: shown a moment after the rating.
        await page.reload();
        await expectHeading(page, 'Generation');
        return page.getByRole('region', { name: 'Feedback' }).innerText();
      }, settles)
      .toMatch(/Rating\s+Good\s+Tags\s+accurate/);
    await checkPage(dashboard, 'generation');

    // The usage page: its recent generations link to their detail.
    await nav.getByRole('link', { name: 'Usage' }).click();
    await expectHeading(page, 'Usage');
    const recent = page.getByRole('region', { name: 'Recent generations' });
    await recent.getByRole('link', { name: latest }).click();
    await expectHeading(page, 'Generation');
    await expect.poll(() => fact(page, 'Model that served'), settles).toBe(MODEL_B);
    await expect.poll(() => fact(page, 'Key'), settles).toContain('beta');
    await page.goBack();
    await expectHeading(page, 'Usage');

    // By model: the aggregates follow the batch settlement, so the page is refreshed until the three requests show.
    await expect.poll(() => refreshedTotal(page), settles).toMatch(/^Total\s+3\s/);
    const byModel = await totalsRows(page);
    expect(byModel).toHaveLength(2);
    expect(byModel.find((row) => row.includes(MODEL_A))).toMatch(/\s2\s+\d+\s+16\s+\$0\.\d+$/);
    expect(byModel.find((row) => row.includes(MODEL_B))).toMatch(/\s1\s+\d+\s+8\s+\$0\.\d+$/);
    expect(await page.locator('table.usage-totals tfoot').innerText()).toMatch(/Total\s+3\s+\d+\s+24\s+\$0\.\d+/);
    const legend = () => page.locator('.usage-chart .recharts-legend-item-text').allInnerTexts();
    await expect.poll(legend).toEqual(expect.arrayContaining([MODEL_A, MODEL_B]));
    expect(await page.locator('.usage-chart .recharts-bar-rectangle').count()).toBeGreaterThan(0);
    await checkPage(dashboard, 'usage');

    // The CSV of the same report, saved with the session: a header row, then the models' rows.
    const [csvFile] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    expect(csvFile.suggestedFilename()).toMatch(/^usage-by-model-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv$/);
    const csv = (await readFile((await csvFile.path()) as string, 'utf8')).trim().split(/\r?\n/);
    expect(csv[0]).toMatch(/^bucket_start,/);
    expect(csv[0]).toContain('model');
    expect(csv[0]).toContain('cost_usd');
    expect(csv.slice(1).filter((line) => line.includes(MODEL_A) || line.includes(MODEL_B)).length).toBeGreaterThanOrEqual(2);

    // By key, per hour over the last 24 hours, requests drawn: the keys by name.
    await page.getByLabel('Group by').selectOption('key');
    await page.getByLabel('Period').selectOption('24h');
    await page.getByLabel('Chart').selectOption('requests');
    await expect.poll(async () => (await totalsRows(page)).length, settles).toBe(2);
    const byKey = await totalsRows(page);
    expect(byKey.find((row) => row.includes('alpha'))).toMatch(/\s2\s+\d+\s+16\s+\$0\.\d+$/);
    expect(byKey.find((row) => row.includes('beta'))).toMatch(/\s1\s+\d+\s+8\s+\$0\.\d+$/);
    await expect.poll(legend).toEqual(expect.arrayContaining(['alpha', 'beta']));
    await checkPage(dashboard, 'usage-by-key');
    await dashboard.context.close();
  }, 60_000);

  it('lists the audit log to owners (a key created, filtered by action), hides it from developers, and requests a data export and downloads it', async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { orgId, name: organization } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);
    const key = await suite.call('POST', '/v1/keys', { token: owner.token, headers: { 'x-workspace-id': orgId }, body: { name: 'audited' } });
    expect(key.status, key.text).toBe(201);
    const keyId: string = key.json.key.key_id;

    // The developer: no audit log in the organization (the API answers 403 to them).
    const developerDashboard = await openDashboard(suite, '/app/sign-in');
    const developerPage = developerDashboard.page;
    await signInThroughUi(developerPage, developer.email, developer.password);
    await developerPage.getByLabel('Workspace', { exact: true }).selectOption({ label: organization });
    await expect.poll(() => developerPage.locator('.role').innerText()).toBe('Role: developer');
    const developerNav = developerPage.getByRole('navigation', { name: 'Dashboard' });
    expect(await developerNav.getByRole('link').allInnerTexts()).not.toContain('Audit log');
    await goWithinApp(developerPage, '/app/audit');
    await expectHeading(developerPage, 'Not available');
    const refused = await suite.call('GET', '/v1/audit-events', { token: developer.token, headers: { 'x-workspace-id': orgId } });
    expect(refused.status).toBe(403);
    await developerDashboard.context.close();

    // The owner: the key's creation in the organization's log, with who, from where and the request id.
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, owner.email, owner.password);
    await page.getByLabel('Workspace', { exact: true }).selectOption({ label: organization });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: owner');
    const nav = page.getByRole('navigation', { name: 'Dashboard' });
    await nav.getByRole('link', { name: 'Audit log' }).click();
    await expectHeading(page, 'Audit log');
    const filters = page.getByRole('form', { name: 'Filter the audit log' });
    await page.locator('table.audit-events, .empty').first().waitFor();

    // A window that ends before it starts: the API's 400 names `since`, shown at (and focusing) the From input.
    await filters.getByLabel(/^From/).fill('2026-11-20T10:00');
    await filters.getByLabel(/^Until/).fill('2026-11-19T10:00');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    expect(await invalidFieldText(page, 'since')).toContain('must not be after');
    await expect
      .poll(() => page.evaluate(() => (globalThis as unknown as { document: { activeElement: { name?: string } } }).document.activeElement.name))
      .toBe('since');
    await filters.getByLabel(/^From/).fill('');
    await filters.getByLabel(/^Until/).fill('');

    // Filtered by action: the key's creation, once.
    await filters.getByLabel(/^Action/).selectOption(auditedAction);
    const created = page.locator('table.audit-events tbody tr', { hasText: auditedAction });
    // Records arrive through events: within about a second of the action.
    await expect
      .poll(async () => {
        await filters.getByRole('button', { name: 'Apply filters' }).click();
        // The filter is tried ("Searching…"), then the list starts again with it: its records, or "No records".
        await filters.getByRole('button', { name: 'Apply filters' }).waitFor();
        await page.locator('table.audit-events, .empty').first().waitFor();
        return created.count();
      }, settles)
      .toBe(1);
    const row = await created.innerText();
    expect(row).toContain(keyId);
    expect(row).toContain('You');
    expect(row).toMatch(/user, from \S+/);
    expect(row).toContain('success');
    expect(row).toMatch(/req_\S+/);
    expect(await page.locator('table.audit-events tbody tr').count()).toBe(1);
    await checkPage(dashboard, 'audit-filtered');

    // Every action again: the member's invitation and joining, and the developer refused a moment ago.
    await filters.getByLabel(/^Action/).selectOption('');
    await filters.getByRole('button', { name: 'Apply filters' }).click();
    await filters.getByRole('button', { name: 'Apply filters' }).waitFor();
    const actions = page.locator('table.audit-events tbody th code');
    await expect
      .poll(() => actions.allInnerTexts(), settles)
      .toEqual(expect.arrayContaining(['key.created', 'member.invited', 'member.joined', 'access.denied']));
    await checkPage(dashboard, 'audit');

    // Data export: requested from the account page, being prepared, a link to be mailed.
    await nav.getByRole('link', { name: 'Account' }).click();
    await expectHeading(page, 'Account');
    const exportSection = page.getByRole('region', { name: 'Export my data' });
    await exportSection.getByRole('button', { name: 'Export my data' }).click();
    await exportSection.getByText(`A link to download it will be mailed to ${owner.email}`).waitFor();
    const requested = await exportSection.getByTestId('data-export').innerText();
    expect(requested).toMatch(/Export id\s+exp_\S+\s+Status\s+Being prepared\s+Requested/);
    const exportId = /exp_\S+/.exec(requested)?.[0];
    await checkPage(dashboard, 'account-export');

    // Built in the background at once: downloaded from the page with the session (202 until then).
    const saved = page.waitForEvent('download', { timeout: 20_000 });
    const download = exportSection.getByRole('button', { name: 'Download the export' });
    await expect
      .poll(async () => {
        await download.click();
        await download.waitFor();
        return exportSection.getByText('The export is saved.').count();
      }, settles)
      .toBe(1);
    const file = await saved;
    expect(file.suggestedFilename()).toBe(`switchboard-export-${exportId}.json`);
    const document = await readFile((await file.path()) as string, 'utf8');
    expect(JSON.parse(document)).toBeTypeOf('object');
    expect(document).toContain(owner.email);
    // The status shows once the download's answer is in: the file may be saved a moment before.
    await expect.poll(() => exportSection.getByTestId('data-export').innerText(), { timeout: 10_000 }).toMatch(/Status\s+Ready/);

    // The mail's link, opened directly by the signed-in reader: the account page with that export, downloaded with the session.
    const [link, ...otherLinks] = linksOf(await waitForMail(suite.mailboxDir, owner.email, 'data_export_ready')).text;
    expect(otherLinks).toEqual([]);
    expect(new URL(link).pathname).toBe(`/app/account/exports/${exportId}`);
    // On this origin: the mesh's PUBLIC_BASE_URL says localhost, the dashboard (and its session's cookie) is on 127.0.0.1.
    await page.goto(new URL(new URL(link).pathname, page.url()).href);
    await expectHeading(page, 'Account');
    const linked = page.getByRole('region', { name: 'Export my data' });
    await expect.poll(() => linked.getByTestId('data-export').innerText(), { timeout: 10_000 }).toMatch(new RegExp(`^Export id\\s+${exportId}$`));
    await checkPage(dashboard, 'account-export-link');
    const savedAgain = page.waitForEvent('download', { timeout: 20_000 });
    await linked.getByRole('button', { name: 'Download the export' }).click();
    expect((await savedAgain).suggestedFilename()).toBe(`switchboard-export-${exportId}.json`);
    await expect.poll(() => linked.getByTestId('data-export').innerText(), { timeout: 10_000 }).toMatch(/Status\s+Ready/);
    await dashboard.context.close();
  }, 60_000);
});
