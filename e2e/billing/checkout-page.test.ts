import { renderCheckoutPage } from '@switchboard/billing/checkout-page';
import type { CheckoutRow } from '@switchboard/billing/store/checkouts';
import { launchChromium, openPage } from '@switchboard/testkit/browser';
import { expectErrorBody, meshSuiteOfFile, signUp } from '@switchboard/testkit/mesh';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The sandbox provider's payment page (docs/api/billing.md#sandbox): `GET /v1/billing/sandbox/checkout/{token}` is an
 * HTML page with a Pay button and a strict CSP of its own (a fresh nonce per answer, no
 * 'unsafe-inline'), while every JSON answer keeps the gateway's deny-all policy. Then the page in
 * a real headless Chromium: no CSP violation, Pay completes the top-up once.
 */

const denyAllPolicy = "default-src 'none'; frame-ancestors 'none'";

const suite = meshSuiteOfFile();

const signedUpToken = async () => (await signUp(suite.call)).token;

let keyCounter = 0;
async function topup(token: string, amountUsd: string) {
  keyCounter += 1;
  const created = await suite.call('POST', '/v1/billing/topup', {
    token,
    body: { amount_usd: amountUsd, idempotency_key: `page-${Date.now()}-${keyCounter}` },
  });
  expect(created.status, created.text).toBe(201);
  expect(created.json).toMatchObject({ status: 'pending', checkout_url: expect.stringContaining('/v1/billing/sandbox/checkout/') });
  return created.json as { checkout_id: string; checkout_url: string; amount_usd: string; status: string };
}

const pathOf = (url: string) => new URL(url).pathname;
const nonceOf = (policy: string) => /script-src 'nonce-([^']+)'/.exec(policy)?.[1];

describe('the sandbox checkout page over REST', () => {
  it('is HTML with a Pay button and a strict CSP of its own, with a fresh nonce each time', async () => {
    const token = await signedUpToken();
    const checkout = await topup(token, '7.25');
    const page = await suite.call('GET', pathOf(checkout.checkout_url));
    expect(page.status, page.text).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-request-id')).toBeTruthy();
    // No internal header of the service reaches the client.
    expect([...page.headers.keys()].filter((name) => name.startsWith('sb-'))).toEqual([]);

    const policy = page.headers.get('content-security-policy')!;
    const nonce = nonceOf(policy);
    expect(nonce).toMatch(/^[A-Za-z0-9+/]{22,}={0,2}$/);
    expect(policy).toBe(
      `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    );
    expect(policy).not.toContain('unsafe-inline');
    expect(policy).not.toContain('unsafe-eval');

    expect(page.text).toMatch(/^<!doctype html>/);
    expect(page.text).toContain('<h1>Top-up of 7.25 USD</h1>');
    expect(page.text).toContain(`<code>${checkout.checkout_id}</code>`);
    expect(page.text).toContain('<dd id="status" class="status status-pending">pending</dd>');
    expect(page.text).toMatch(
      /<form id="pay" method="post" action="\.\/[\w-]+\/complete"><button id="pay-button" type="submit">Pay 7\.25 USD<\/button><\/form>/,
    );
    // A link back to the dashboard's billing page, in the checkout's workspace.
    const workspaceId = (await suite.call('GET', '/v1/account', { token })).json.personal_workspace_id;
    const back = /<a id="back" href="([^"]+)">Back to billing<\/a>/.exec(page.text)?.[1].replaceAll('&amp;', '&');
    expect(back).toBe(`/app/billing?workspace_id=${workspaceId}&checkout_id=${checkout.checkout_id}`);
    // Every script and style of the page carries this answer's nonce; no inline handlers or style attributes.
    expect(page.text.match(/<script\b[^>]*>/g)).toEqual([`<script nonce="${nonce}">`]);
    expect(page.text.match(/<style\b[^>]*>/g)).toEqual([`<style nonce="${nonce}">`]);
    expect(page.text).not.toMatch(/\s(on\w+|style)=/i);

    const again = await suite.call('GET', pathOf(checkout.checkout_url));
    expect(again.status).toBe(200);
    expect(nonceOf(again.headers.get('content-security-policy')!)).not.toBe(nonce);
    // The alias without /v1 answers the same page; its form's relative action follows it.
    const alias = await suite.call('GET', pathOf(checkout.checkout_url).replace(/^\/v1/, ''));
    expect(alias.status).toBe(200);
    expect(alias.text).toContain('Pay 7.25 USD');
  });

  it('keeps the deny-all CSP on every JSON answer, completion included', async () => {
    const token = await signedUpToken();
    const checkout = await topup(token, '2');
    const completed = await suite.call('POST', `${pathOf(checkout.checkout_url)}/complete`);
    expect(completed.status, completed.text).toBe(200);
    expect(completed.json).toMatchObject({ status: 'completed', amount_usd: '2' });
    expect(completed.headers.get('content-security-policy')).toBe(denyAllPolicy);
    expect((await suite.call('GET', '/v1/billing/balance', { token })).headers.get('content-security-policy')).toBe(denyAllPolicy);

    // A completed checkout's page shows the outcome and no button (nor script).
    const page = await suite.call('GET', pathOf(checkout.checkout_url));
    expect(page.status).toBe(200);
    expect(page.text).toContain('<dd id="status" class="status status-completed">completed</dd>');
    expect(page.text).toContain('Paid.');
    expect(page.text).not.toContain('<button');
    expect(page.text).not.toContain('<script');
  });

  it('answers an unknown token with the JSON error body, reflecting nothing', async () => {
    for (const token of ['unknown-token', '%3Cscript%3Ealert(1)%3C%2Fscript%3E', '%22%3E%3Cimg%20src%3Dx%3E']) {
      const response = await suite.call('GET', `/v1/billing/sandbox/checkout/${token}`);
      expectErrorBody(response, 404, 'checkout_not_found', null);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(response.headers.get('content-security-policy')).toBe(denyAllPolicy);
      expect(response.text).not.toMatch(/[<>]/);
    }
    expectErrorBody(await suite.call('POST', '/v1/billing/sandbox/checkout/unknown-token/complete'), 404, 'checkout_not_found');
  });

  it('escapes everything it puts into the HTML', () => {
    const evil = '"><script>alert(1)</script><img src=x onerror=alert(2)>';
    const escaped = '&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;';
    const row: CheckoutRow = {
      id: `chk_${evil}`,
      workspace_id: 'org_x',
      idempotency_key: evil,
      amount_usd: '12.5',
      provider: 'sandbox',
      status: 'pending',
      checkout_url: null,
      token_key_id: null,
      provider_session_id: null,
      created_at: new Date('2026-01-01T00:00:00Z'),
      expires_at: new Date('2026-01-02T00:00:00Z'),
      completed_at: null,
      created_by: null,
      cursor_micros: '0',
    };
    const pending = renderCheckoutPage(row, `tok'${evil}`, `n0nce${evil}`);
    expect(pending).not.toContain(evil);
    expect(pending).not.toContain('<img');
    expect(pending).not.toContain('<script>');
    expect(pending).toContain(`<code>chk_${escaped}</code>`);
    expect(pending).toContain(`<style nonce="n0nce${escaped}">`);
    expect(pending).toContain(`<script nonce="n0nce${escaped}">`);
    // The token is a path segment of the form's action: percent-encoded, then escaped.
    expect(pending).toContain(`<form id="pay" method="post" action="./${encodeURIComponent(`tok'${evil}`).replace(/'/g, '&#39;')}/complete">`);
    expect(pending).toContain('<button id="pay-button" type="submit">Pay 12.50 USD</button>');

    const odd = renderCheckoutPage({ ...row, status: `failed${evil}` as CheckoutRow['status'], completed_at: new Date('2026-01-01T01:00:00Z') }, 'tok', 'n');
    expect(odd).not.toContain(evil);
    expect(odd).toContain(`<dd id="status" class="status status-failed${escaped}">failed${escaped}</dd>`);
    expect(odd).not.toContain('<button');
  });
});

describe('the sandbox checkout page in headless Chromium', () => {
  let browser: Browser;
  let context: BrowserContext;

  beforeAll(async () => {
    browser = await launchChromium();
    context = await browser.newContext();
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
  });

  async function balanceOf(token: string): Promise<string> {
    const balance = await suite.call('GET', '/v1/billing/balance', { token });
    expect(balance.status, balance.text).toBe(200);
    return balance.json.balance_usd;
  }

  it('pays a top-up with the Pay button, without a CSP violation, and credits it once', async () => {
    const token = await signedUpToken();
    expect(await balanceOf(token)).toBe('1.00');
    const checkout = await topup(token, '7.25');

    const { page, problems } = await openPage(context);
    const opened = await page.goto(checkout.checkout_url);
    expect(opened?.status()).toBe(200);
    expect(await page.title()).toBe('Top-up of 7.25 USD · Switchboard sandbox checkout');
    const button = page.locator('#pay-button');
    expect(await button.textContent()).toBe('Pay 7.25 USD');
    expect(await page.locator('#status').textContent()).toBe('pending');
    // The nonce'd stylesheet applied (a blocked one would leave the browser's default button).
    type InPage = { getComputedStyle(element: unknown): { backgroundColor: string } };
    expect(await button.evaluate((el) => (globalThis as unknown as InPage).getComputedStyle(el).backgroundColor)).toBe('rgb(31, 111, 235)');

    // A second tab opened before paying: its Pay button goes stale once the first one pays.
    const stale = await openPage(context);
    await stale.page.goto(checkout.checkout_url);

    const completion = page.waitForRequest((request) => request.method() === 'POST' && request.url().endsWith('/complete'));
    await button.click();
    const request = await completion;
    // Sent by the page's script (fetch), not by a form navigation.
    expect(request.resourceType()).toBe('fetch');
    await page.locator('#status', { hasText: 'completed' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#message').textContent()).toBe('Paid. 7.25 USD was added to the workspace balance.');
    expect(await page.locator('#pay').isHidden()).toBe(true);
    expect(page.url()).toBe(checkout.checkout_url);
    expect(problems).toEqual([]);

    expect(await balanceOf(token)).toBe('8.25');
    const listed = await suite.call('GET', '/v1/billing/topups', { token });
    expect(listed.json.data).toEqual([expect.objectContaining({ checkout_id: checkout.checkout_id, status: 'completed', completed_at: expect.any(String) })]);

    // Paying again, from the stale tab or by a direct POST, credits nothing.
    await stale.page.locator('#pay-button').click();
    await stale.page.locator('#status', { hasText: 'completed' }).waitFor({ timeout: 10_000 });
    expect(await stale.page.locator('#message').textContent()).toContain('Paid.');
    expect(stale.problems).toEqual([]);
    const repeated = await suite.call('POST', `${pathOf(checkout.checkout_url)}/complete`);
    expect(repeated.status, repeated.text).toBe(200);
    expect(repeated.json.status).toBe('completed');
    expect(await balanceOf(token)).toBe('8.25');

    // Reloaded, the page shows the outcome and offers no button.
    await page.reload();
    expect(await page.locator('#status').textContent()).toBe('completed');
    expect(await page.locator('#pay-button').count()).toBe(0);
    expect(await page.locator('#message').textContent()).toContain('Paid.');
    expect(problems).toEqual([]);
    await page.close();
    await stale.page.close();
  });

  it('still pays without JavaScript: the form posts to the completion route', async () => {
    const token = await signedUpToken();
    const checkout = await topup(token, '3');
    const noScript = await browser.newContext({ javaScriptEnabled: false });
    try {
      const page = await noScript.newPage();
      await page.goto(checkout.checkout_url);
      const [answer] = await Promise.all([page.waitForResponse((response) => response.url().endsWith('/complete')), page.locator('#pay-button').click()]);
      expect(answer.status()).toBe(200);
      await page.waitForURL(`${checkout.checkout_url}/complete`);
      expect(page.url()).toBe(`${checkout.checkout_url}/complete`);
      expect(JSON.parse((await page.locator('body').textContent()) ?? '')).toMatchObject({ checkout_id: checkout.checkout_id, status: 'completed' });
    } finally {
      await noScript.close();
    }
    expect(await balanceOf(token)).toBe('4.00');
  });
});
