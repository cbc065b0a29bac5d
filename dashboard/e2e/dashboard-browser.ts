import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { expectAccessible, launchChromium, openPage, type WatchedPage } from '@switchboard/testkit/browser';
import type { Mail } from '@switchboard/testkit/mailbox';
import { bootMesh, type RestCall, restClient } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';

/** A mesh serving the built dashboard, and a Chromium to use it with. */
export interface DashboardSuite {
  mesh: Mesh;
  /** REST calls to the same gateway (to set up what a test is not about). */
  call: RestCall;
  browser: Browser;
  /** Where the mesh writes its mail (.eml files; see testkit/src/mailbox.ts). */
  mailboxDir: string;
  stop(): Promise<void>;
}

/** `env`: settings for the mesh (e.g. to let webhooks reach a local receiver). */
async function startDashboardSuite(env: Record<string, string> = {}): Promise<DashboardSuite> {
  if (!existsSync(path.join(repoRoot, 'dashboard/dist/index.html'))) throw new Error('dashboard/dist is missing: `npm run build` builds the dashboard');
  const [mesh, browser] = await Promise.all([bootMesh(env), launchChromium()]);
  return {
    mesh,
    browser,
    call: restClient(mesh.gatewayUrl),
    mailboxDir: mesh.env.MAILBOX_DIR,
    async stop() {
      await browser.close();
      await mesh.stop();
    },
  };
}

/**
 * The test file's suite: started before its tests, with the settings `env` gives (computed then,
 * so they may start what the mesh is to reach), and stopped after them.
 */
export function dashboardSuiteOfFile(env: () => Record<string, string> | Promise<Record<string, string>> = () => ({})): DashboardSuite {
  const suite = {} as DashboardSuite;
  beforeAll(async () => {
    Object.assign(suite, await startDashboardSuite(await env()));
  });
  afterAll(async () => {
    await suite.stop?.();
  });
  return suite;
}

/** A dashboard suite whose mesh answers `models` (overseas, no tier) from a local upstream of its own. */
export function dashboardSuiteWithModels(models: string[]): DashboardSuite {
  let upstream: OpenAiUpstream | undefined;
  let catalog: TestCatalog | undefined;
  const suite = dashboardSuiteOfFile(async () => {
    upstream = await OpenAiUpstream.start();
    catalog = await writeTestCatalog(
      { overseas: upstream },
      models.map((id) => catalogModel(id, 'overseas', [])),
    );
    return catalog.env;
  });
  afterAll(async () => {
    await upstream?.close();
    await catalog?.remove();
  });
  return suite;
}

/** A REST call of `user` to the suite's gateway (to set up what a test is not about) that must answer `status`; its JSON. */
export async function restAs(suite: DashboardSuite, user: { token: string }, method: string, pathname: string, body?: unknown, status = 201) {
  const response = await suite.call(method, pathname, { token: user.token, body });
  expect(response.status, response.text).toBe(status);
  return response.json;
}

export interface DashboardPage extends WatchedPage {
  /** The page's own browser context: its memory is one user's session. */
  context: BrowserContext;
}

/** A new browser context (nobody signed in) with a watched page at `path` of the gateway (default: the dashboard's start). */
export async function openDashboard(suite: DashboardSuite, pathname = '/app/'): Promise<DashboardPage> {
  const context = await suite.browser.newContext({ viewport: { width: 1280, height: 900 } });
  // The API's 4xx answers are part of the flows tested (a form's error): they are no problem.
  const watched = await openPage(context, { allowHttpErrors: true });
  await watched.page.goto(`${suite.mesh.gatewayUrl}${pathname}`);
  return { ...watched, context };
}

/**
 * A new browser context showing the HTML part of `mail` as a mail client would, checked: it
 * fetches nothing (no remote image or stylesheet) and axe-core finds no serious problem. Its
 * links lead to the dashboard (PUBLIC_BASE_URL).
 */
export async function openMail(suite: DashboardSuite, mail: Mail): Promise<DashboardPage> {
  const context = await suite.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const watched = await openPage(context, { allowHttpErrors: true });
  const fetched: string[] = [];
  const onRequest = (request: { url(): string }) => fetched.push(request.url());
  watched.page.on('request', onRequest);
  expect(mail.html, `an HTML part in mail ${mail.file}`).toBeDefined();
  await watched.page.setContent(mail.html!);
  watched.page.off('request', onRequest);
  expect(fetched, `what the ${mail.kind} mail fetched`).toEqual([]);
  await expectAccessible(watched.page, `the ${mail.kind} mail`);
  return { ...watched, context };
}

/**
 * Checks the page as it is now: nothing went wrong in it (no CSP violation, page error, failed
 * request or console error) and axe-core finds no serious or critical violation. With
 * `DASHBOARD_SCREENSHOTS=<dir>` it also saves `<dir>/dashboard-<name>.png` (the README's pictures).
 */
export async function checkPage({ page, problems }: WatchedPage, name: string): Promise<void> {
  // A visible heading: the page has rendered.
  await page.locator('h1').first().waitFor();
  expect(problems, `problems on the ${name} page`).toEqual([]);
  await expectAccessible(page, `the ${name} page`);
  const directory = process.env.DASHBOARD_SCREENSHOTS;
  if (directory) {
    mkdirSync(directory, { recursive: true });
    await page.screenshot({ path: path.join(directory, `dashboard-${name}.png`), fullPage: true });
  }
}

/** `expect.poll`'s options for what the page shows once the API did it (a reload, a webhook attempt): its default second is too short. */
export const settles = { timeout: 10_000 };

/** The page's main heading, once it says `title`. */
export async function expectHeading(page: Page, title: string): Promise<void> {
  await page.getByRole('heading', { level: 1, name: title }).waitFor();
}

/** The input of the current form that the API calls `name` (the error body's `field`); `page` may be a part of the page (a section with its own form). */
export function input(page: Page | Locator, name: string): Locator {
  return page.locator(`[name="${name}"]`);
}

/**
 * Waits until the input the API calls `name` is marked invalid (`aria-invalid`), and returns
 * what it is described by (its hint and the error message shown next to it).
 */
export async function invalidFieldText(page: Page | Locator, name: string): Promise<string> {
  await expect.poll(() => input(page, name).getAttribute('aria-invalid')).toBe('true');
  const ids = ((await input(page, name).getAttribute('aria-describedby')) ?? '').split(' ').filter(Boolean);
  return (await Promise.all(ids.map((id) => page.locator(`[id="${id}"]`).innerText()))).join('\n');
}

/** Signs in through the sign-in page (no 2FA); ends on the page titled `landing` (the overview, unless the sign-in was asked with `?next=`). */
export async function signInThroughUi(page: Page, email: string, password: string, landing = 'Overview'): Promise<void> {
  await expectHeading(page, 'Sign in');
  await page.getByLabel('Email address', { exact: true }).fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expectHeading(page, landing);
}

/**
 * Goes to `path` (under /app) as a typed-in address would, without reloading the page: a reload
 * renews the session from its cookie (tested on its own), which these steps need not pay for.
 */
export async function goWithinApp(page: Page, pathname: string): Promise<void> {
  await page.evaluate((target) => {
    const { history, dispatchEvent, PopStateEvent } = globalThis as unknown as {
      history: { pushState(state: null, title: string, url: string): void };
      dispatchEvent(event: unknown): void;
      PopStateEvent: new (type: string) => unknown;
    };
    history.pushState(null, '', target);
    dispatchEvent(new PopStateEvent('popstate'));
  }, pathname);
}
