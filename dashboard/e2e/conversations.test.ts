import { randomBytes } from 'node:crypto';
import { type SignedUp, signUp } from '@switchboard/testkit/mesh';
import type { Request as PlaywrightRequest } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteWithModels, expectHeading, invalidFieldText, openDashboard, restAs, settles, signInThroughUi } from './dashboard-browser.js';

/**
 * The Conversations and Feedback pages in Chromium, against the whole mesh and a local
 * OpenAI-compatible upstream: a conversation written through REST and through a chat completion
 * of the data plane is found on the second page of the list and read message by message; the
 * ratings given to two generations show in the feedback summary, per model and per tag. The
 * Playground sends a chat request through the front door with a key created on the spot; the
 * Activity shows it with its feedback, and Models the catalog's prices on the workspace's plan.
 */

// Model ids of this run only: feedback and routing scores of other runs stay apart.
const tag = randomBytes(3).toString('hex');
const MODEL_A = `dash-a-${tag}`;
const MODEL_B = `dash-b-${tag}`;

const suite = dashboardSuiteWithModels([MODEL_A, MODEL_B]);

const rest = (user: SignedUp, method: string, pathname: string, body?: unknown, status = 201) => restAs(suite, user, method, pathname, body, status);

/** A chat completion through the gateway with an API key, the way a user's code sends one; answers the generation id. */
async function complete(apiKey: string, model: string, content: string, conversationId?: string): Promise<string> {
  const response = await fetch(`${suite.mesh.gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      ...(conversationId ? { 'x-service-conversation-id': conversationId } : {}),
    },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: 8 }),
    signal: AbortSignal.timeout(15_000),
  });
  expect(response.status, await response.clone().text()).toBe(200);
  return response.headers.get('x-service-generation-id') ?? '';
}

describe('the Conversations and Feedback pages', () => {
  it('browses the conversations a page at a time with the messages of the one picked, and sums up the feedback', async () => {
    const user = await signUp(suite.call);
    const { full_key: apiKey } = await rest(user, 'POST', '/v1/keys', { name: 'dashboard conversations' });

    // The oldest conversation: a message through REST, then a question and its answer through the data plane.
    const lisbon = await rest(user, 'POST', '/v1/conversations', { title: 'Trip to Lisbon', metadata: { channel: 'web' } });
    await rest(user, 'POST', `/v1/conversations/${lisbon.conversation_id}/messages`, { role: 'system', content: 'You plan city trips.' });
    const rated = await complete(apiKey, MODEL_A, 'Three things to see in Lisbon?', lisbon.conversation_id);
    const other = await complete(apiKey, MODEL_B, 'Say hi');
    // 21 newer ones push it to the second page of 20.
    for (let i = 1; i <= 21; i++) await rest(user, 'POST', '/v1/conversations', { title: `Conversation ${i}` });

    await rest(user, 'POST', '/v1/feedback', { generation_id: rated, rating: 1, tags: ['accurate', 'concise'] });
    await rest(user, 'POST', '/v1/feedback', { generation_id: other, rating: -1, tags: ['too_verbose'], comment: 'Too long.' });

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    const nav = page.getByRole('navigation', { name: 'Dashboard' });
    await nav.getByRole('link', { name: 'Conversations' }).click();
    await expectHeading(page, 'Conversations');
    const list = page.getByRole('navigation', { name: 'Conversations' }).getByRole('link');
    await expect.poll(() => list.count(), settles).toBe(20);
    expect(await list.first().innerText()).toContain('Conversation 21');
    await page.getByText('Pick a conversation').waitFor();
    await checkPage(dashboard, 'conversations-list');

    // The next page holds the oldest one.
    await page.getByRole('button', { name: 'Load more conversations' }).click();
    await expect.poll(() => list.count(), settles).toBe(22);
    expect(await page.getByRole('button', { name: 'Load more conversations' }).count()).toBe(0);

    // Picked: its messages in order, the metadata, and an address of its own.
    await list.filter({ hasText: 'Trip to Lisbon' }).click();
    const conversation = page.getByRole('article', { name: 'Trip to Lisbon' });
    const messages = conversation.getByRole('listitem');
    await expect.poll(() => messages.count(), settles).toBe(3);
    const texts = await messages.allInnerTexts();
    expect(texts[0]).toMatch(/^System\s[\s\S]*You plan city trips\.$/);
    expect(texts[1]).toMatch(/^User\s[\s\S]*Three things to see in Lisbon\?$/);
    expect(texts[2]).toMatch(/^Assistant\s[\s\S]*w1 w2 w3 w4 w5 w6 w7 w8$/);
    expect(await conversation.locator('.metadata').innerText()).toContain('"channel": "web"');
    expect(new URL(page.url()).pathname).toBe(`/app/conversations/${lisbon.conversation_id}`);
    expect(await list.filter({ hasText: 'Trip to Lisbon' }).getAttribute('aria-current')).toBe('page');
    await checkPage(dashboard, 'conversations');

    // A conversation without messages says so.
    await list.filter({ hasText: 'Conversation 7' }).first().click();
    await page
      .getByRole('article', { name: /^Conversation 7$/ })
      .getByText('No messages yet')
      .waitFor();

    // The feedback of the last 30 days: the totals, per model and per tag, and a chart.
    await nav.getByRole('link', { name: 'Feedback' }).click();
    await expectHeading(page, 'Feedback');
    const overview = page.getByRole('region', { name: 'Overview' });
    await expect.poll(() => overview.innerText(), settles).toMatch(/Ratings\s+2\s+Thumbs up\s+1\s+Thumbs down\s+1\s+Approval\s+50%/);
    const byModel = page.getByRole('region', { name: 'By model' });
    expect(await byModel.getByRole('row').allInnerTexts()).toEqual([
      expect.stringMatching(/Model\s+Ratings\s+Thumbs up\s+Thumbs down\s+Approval/),
      expect.stringMatching(new RegExp(`^${MODEL_A}\\s+1\\s+1\\s+0\\s+100%$`)),
      expect.stringMatching(new RegExp(`^${MODEL_B}\\s+1\\s+0\\s+1\\s+0%$`)),
    ]);
    // The chart's code loads on first use.
    await expect.poll(() => byModel.locator('figure svg').count(), settles).toBeGreaterThan(0);
    const byTag = page.getByRole('region', { name: 'By tag' });
    expect((await byTag.getByRole('row').allInnerTexts()).slice(1)).toEqual([
      expect.stringMatching(/^accurate\s+1\s+1\s+0\s+100%$/),
      expect.stringMatching(/^concise\s+1\s+1\s+0\s+100%$/),
      expect.stringMatching(/^too_verbose\s+1\s+0\s+1\s+0%$/),
    ]);
    await checkPage(dashboard, 'feedback');

    // Another window loads anew.
    await page.getByLabel('Period').selectOption({ label: 'Last 7 days' });
    await expect.poll(() => overview.innerText(), settles).toMatch(/Ratings\s+2/);

    // A workspace without ratings: empty tables, no chart.
    const newcomer = await signUp(suite.call);
    const empty = await openDashboard(suite, '/app/sign-in');
    await signInThroughUi(empty.page, newcomer.email, newcomer.password);
    await empty.page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Feedback' }).click();
    await empty.page.getByText('No ratings in the last 30 days').waitFor();
    expect(await empty.page.locator('figure svg').count()).toBe(0);
    await checkPage(empty, 'feedback-empty');
    await empty.page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Conversations' }).click();
    await empty.page.getByText('No conversations yet').waitFor();
    await checkPage(empty, 'conversations-empty');

    await Promise.all([dashboard.context.close(), empty.context.close()]);
  }, 60_000);

  it('sends a chat request from the Playground with a playground key, shows its service object, then the request in the Activity and the prices in Models', async () => {
    const user = await signUp(suite.call);
    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, user.email, user.password);
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Playground' }).click();
    await expectHeading(page, 'Playground');
    await checkPage(dashboard, 'playground-empty');

    // No key yet: the form says so at its field.
    const request = page.getByRole('region', { name: 'Request' });
    await request.getByLabel('Message').fill('Say hi');
    await request.getByRole('button', { name: 'Send' }).click();
    expect(await invalidFieldText(page, 'api_key')).toContain('Paste an API key');

    // A key the API refuses: its error, in words.
    await request.getByLabel('API key').fill('sb_not_a_real_key');
    await request.getByRole('button', { name: 'Send' }).click();
    await request.getByRole('alert').waitFor();

    // A playground key, shown once and filled in.
    await page.getByRole('button', { name: 'Create a playground key' }).click();
    const fullKey = await page.getByLabel('Your playground key').inputValue();
    expect(fullKey).toMatch(/^sb_/);
    expect(await request.getByLabel('API key').inputValue()).toBe(fullKey);

    await request.getByLabel('Model', { exact: true }).selectOption({ label: 'A model by its id…' });
    await request.getByLabel('Model id').fill(MODEL_A);
    await request.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => page.getByTestId('playground-answer').innerText(), settles).toBe('w1 w2 w3 w4 w5 w6 w7 w8');
    const service = await page.getByTestId('playground-service').innerText();
    expect(service).toMatch(new RegExp(`Generation\\s+gen_\\S+\\s+Tier\\s+passthrough\\s+Served by\\s+${MODEL_A}\\s+Region\\s+overseas\\s+Cost\\s+\\$\\d`));
    await checkPage(dashboard, 'playground');

    // Streamed: the same answer from the chunks, and a service object of its own from the last one.
    await request.getByLabel(/^Stream the answer/).check();
    // The stream's request ends in one of two events (see below): waited for, so the check that follows is deterministic.
    const isStreamed = (sent: PlaywrightRequest) => sent.url().endsWith('/v1/chat/completions') && (sent.postData() ?? '').includes('"stream":true');
    const streamEnd = Promise.race([
      page.waitForEvent('requestfinished', isStreamed).then(() => 'finished'),
      page.waitForEvent('requestfailed', isStreamed).then((sent) => sent.failure()?.errorText ?? 'failed'),
    ]);
    await request.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => page.getByTestId('playground-service').innerText(), settles).not.toContain(/gen_\S+/.exec(service)?.[0] ?? '');
    expect(await page.getByTestId('playground-answer').innerText()).toBe('w1 w2 w3 w4 w5 w6 w7 w8');
    expect(await page.getByTestId('playground-service').innerText()).toMatch(/Tier\s+passthrough\s+Served by/);
    // Chromium may report a no-store stream the page read to its end as aborted (microsoft/playwright#42742):
    // the whole answer and the last chunk's service object are above, so that report is no problem of the page.
    if ((await streamEnd) === 'net::ERR_ABORTED') {
      const spurious = dashboard.problems.findIndex((problem) => problem.endsWith('/v1/chat/completions net::ERR_ABORTED'));
      dashboard.problems.splice(spurious, 1);
    }

    // The key lived in the page's memory only.
    const stored = await page.evaluate(() => {
      const { localStorage, sessionStorage, document } = globalThis as unknown as {
        localStorage: Record<string, string>;
        sessionStorage: Record<string, string>;
        document: { cookie: string };
      };
      return JSON.stringify([{ ...localStorage }, { ...sessionStorage }, document.cookie]);
    });
    expect(stored).not.toContain(fullKey);

    // The request in the Activity, with the feedback given on it.
    const generationId = /gen_\S+/.exec(service)?.[0] ?? '';
    await rest(user, 'POST', '/v1/feedback', { generation_id: generationId, rating: 1, tags: ['accurate'] });
    const nav = page.getByRole('navigation', { name: 'Dashboard' });
    await nav.getByRole('link', { name: 'Activity' }).click();
    await expectHeading(page, 'Activity');
    const row = page.getByRole('row', { name: new RegExp(generationId) });
    await row.waitFor();
    // Feedback reaches billing through an event: shown a moment after the rating.
    await expect
      .poll(async () => {
        await nav.getByRole('link', { name: 'Models' }).click();
        await nav.getByRole('link', { name: 'Activity' }).click();
        return row.innerText();
      }, settles)
      .toMatch(/Good: accurate$/);
    expect(await row.innerText()).toMatch(new RegExp(`${MODEL_A}\\s+passthrough, overseas\\s+\\d+ / 8\\s+\\$0\\.\\d+\\s+\\d+ ms\\s+completed`));
    await checkPage(dashboard, 'activity');

    // The models of the catalog with the plan's price: the catalog's plus the 5% markup of pay as you go.
    await nav.getByRole('link', { name: 'Models' }).click();
    await expectHeading(page, 'Models');
    const models = page.getByRole('region', { name: 'Models by region' });
    expect(await models.getByRole('row', { name: new RegExp(MODEL_A) }).innerText()).toMatch(/overseas\s+passthrough only\s+\$0\.105\s+\$0\.42$/);
    expect(
      await page
        .getByRole('region', { name: 'Service tiers' })
        .getByRole('row', { name: /service\/fast/ })
        .count(),
    ).toBe(1);
    await checkPage(dashboard, 'models');
    await dashboard.context.close();
  });
});
