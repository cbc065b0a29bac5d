import { mkdtemp, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createDashboardHandler } from '@switchboard/gateway/dashboard';
import { expectErrorBody, signUp } from '@switchboard/testkit/mesh';
import { describe, expect, it } from 'vitest';
import { checkPage, dashboardSuiteOfFile, expectHeading, goWithinApp, openDashboard, signInThroughUi } from './dashboard-browser.js';
import { organizationWithMember } from './organization-member.js';

/**
 * The dashboard's shell: the gateway serves the build under /app/ from its own origin with a
 * strict CSP, and the app renders in Chromium without a CSP violation or a serious axe-core
 * finding; its navigation follows the role in the current workspace.
 */

const policy =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const suite = dashboardSuiteOfFile();
/** The navigation a developer sees, in order; owners and admins also see Webhooks. */
const developerPages = [
  'Overview',
  'Account',
  'Sessions',
  'Organization',
  'Keys',
  'Billing',
  'Usage',
  'Activity',
  'Models',
  'Playground',
  'Conversations',
  'Feedback',
];

const get = (pathname: string, headers: Record<string, string> = {}, method = 'GET') =>
  fetch(`${suite.mesh.gatewayUrl}${pathname}`, { method, headers, redirect: 'manual', signal: AbortSignal.timeout(10_000) });

describe('the gateway serving the dashboard', () => {
  it('redirects / and /app to /app/', async () => {
    for (const pathname of ['/', '/app']) {
      const response = await get(pathname);
      expect(response.status, pathname).toBe(302);
      expect(response.headers.get('location')).toBe('/app/');
    }
  });

  it('answers every page path with index.html under a strict CSP, revalidated with its ETag', async () => {
    const page = await get('/app/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(policy);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const html = await page.text();
    // No inline script or style: every one is a file of the build.
    expect(html.match(/<script\b[^>]*>/g)).toEqual([expect.stringMatching(/^<script type="module" crossorigin src="\/app\/assets\/index-[\w-]+\.js">$/)]);
    expect(html).not.toMatch(/<style|\sstyle=|\son\w+=/i);
    // The script every page loads stays under Vite's 500 kB warning: the charts' code (recharts)
    // is a chunk of its own, loaded by the two pages that draw.
    const entry = await get(html.match(/src="(\/app\/assets\/index-[\w-]+\.js)"/)?.[1] ?? '/app/assets/missing-entry.js');
    expect(entry.status).toBe(200);
    const entrySource = await entry.text();
    expect(entrySource.length).toBeLessThan(500_000);
    expect(entrySource).not.toMatch(/recharts-bar-rectangle/);

    // A page of the app, however deep, is the same document (the app routes it).
    for (const pathname of ['/app/keys', '/app/account/', '/app/no/such/page', '/app/index.html']) {
      const deep = await get(pathname);
      expect(deep.status, pathname).toBe(200);
      expect(deep.headers.get('content-security-policy')).toBe(policy);
      expect(await deep.text()).toBe(html);
    }
    const etag = page.headers.get('etag')!;
    expect((await get('/app/sign-in', { 'if-none-match': etag })).status).toBe(304);
    const head = await get('/app/', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('serves the hashed assets for a year, other files revalidated, and a JSON 404 for a file that is not in the build', async () => {
    const html = await (await get('/app/')).text();
    const script = /src="(\/app\/assets\/[^"]+\.js)"/.exec(html)![1];
    const stylesheet = /href="(\/app\/assets\/[^"]+\.css)"/.exec(html)![1];
    const js = await get(script);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // The bundle needs no eval: the CSP has no 'unsafe-eval'.
    expect(await js.text()).not.toMatch(/\beval\(|new Function\(/);
    expect((await get(stylesheet)).headers.get('content-type')).toBe('text/css; charset=utf-8');
    const icon = await get('/app/favicon.svg');
    expect(icon.headers.get('content-type')).toBe('image/svg+xml');
    expect(icon.headers.get('cache-control')).toBe('no-cache');

    for (const pathname of ['/app/assets/missing.js', '/app/../package.json', '/app/%2e%2e/package.json', '/app/assets/..%2f..%2fpackage.json']) {
      const missing = await get(pathname);
      const text = await missing.text();
      expectErrorBody({ status: missing.status, headers: missing.headers, text, json: JSON.parse(text) }, 404, 'route_not_found');
    }
  });
});

describe('the dashboard handler without a build', () => {
  it('answers 503 dashboard_unavailable until the build is there, then serves it', async () => {
    const distDir = await mkdtemp(path.join(tmpdir(), 'dashboard-dist-'));
    const handle = createDashboardHandler(distDir);
    const server = http.createServer((req, res) => {
      void handle(new URL(req.url ?? '/', 'http://localhost').pathname, res).then((route) => {
        if (!route) {
          res.statusCode = 404;
          res.end();
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const missing = await fetch(`${base}/app/keys`);
      expect(missing.status).toBe(503);
      expect(((await missing.json()) as { error: unknown }).error).toMatchObject({
        code: 'dashboard_unavailable',
        message: expect.stringContaining('npm run build'),
        field: null,
      });
      await writeFile(path.join(distDir, 'index.html'), '<!doctype html><title>built</title>');
      const built = await fetch(`${base}/app/keys`);
      expect(built.status).toBe(200);
      expect(await built.text()).toContain('built');
      expect((await fetch(`${base}/app/other.js`)).status).toBe(404);
      expect((await fetch(`${base}/elsewhere`)).status).toBe(404);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('the dashboard in Chromium', () => {
  it('renders the sign-up page without a CSP violation or a serious accessibility finding', async () => {
    const dashboard = await openDashboard(suite, '/app/sign-up');
    await expectHeading(dashboard.page, 'Create an account');
    await checkPage(dashboard, 'sign-up');
    // Signed out, a page of the app sends to the sign-in page, and back after it.
    await dashboard.page.goto(`${suite.mesh.gatewayUrl}/app/keys`);
    await expectHeading(dashboard.page, 'Sign in');
    expect(new URL(dashboard.page.url()).search).toBe(`?next=${encodeURIComponent('/keys')}`);
    await dashboard.context.close();
  });

  it('lists the pages the role allows in the current workspace, the personal one first', async () => {
    const owner = await signUp(suite.call);
    const developer = await signUp(suite.call);
    const { name: organizationName } = await organizationWithMember(suite.call, suite.mailboxDir, owner, developer);

    const dashboard = await openDashboard(suite, '/app/sign-in');
    const { page } = dashboard;
    await signInThroughUi(page, developer.email, developer.password);
    const nav = page.getByRole('navigation', { name: 'Dashboard' });
    const links = () => nav.getByRole('link').allInnerTexts();
    // The personal workspace: the user owns it.
    const switcher = page.getByLabel('Workspace', { exact: true });
    expect(await switcher.locator('option').allInnerTexts()).toEqual([expect.stringMatching(/\(personal\)$/), organizationName]);
    expect(await page.locator('.role').innerText()).toBe('Role: owner');
    expect(await links()).toEqual([...developerPages, 'Webhooks', 'Audit log']);
    await checkPage(dashboard, 'account-shell');

    // The organization, as a developer: no webhooks (the API would answer 403).
    await switcher.selectOption({ label: organizationName });
    await expect.poll(() => page.locator('.role').innerText()).toBe('Role: developer');
    expect(await links()).toEqual(developerPages);
    // Typed in by hand, the page says why it is not there.
    await nav.getByRole('link', { name: 'Keys' }).click();
    await expectHeading(page, 'API keys');
    await goWithinApp(page, '/app/webhooks');
    await expectHeading(page, 'Not available');
    expect(await page.locator('main').innerText()).toContain('(developer) does not allow this page');
    await checkPage(dashboard, 'not-available');
    await dashboard.context.close();
  });
});
