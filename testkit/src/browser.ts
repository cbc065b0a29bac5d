import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AxeResults } from 'axe-core';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's chromium (CI installs it, see .ci/run), driven by playwright-core; CHROMIUM_PATH points elsewhere. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless Chromium with a fresh temporary profile (removed on close); never a downloaded browser. */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(chromiumPath)) throw new Error(`${chromiumPath} is missing: install Debian's chromium (apt-get install -y chromium), as .ci/run does`);
  return chromium.launch({ executablePath: chromiumPath, args: chromiumArgs });
}

export interface WatchedPage {
  page: Page;
  /** Every page error, CSP violation, failed request and console error or warning so far. */
  problems: string[];
}

/** Chromium's console line for an HTTP error answer to a request of the page's own (e.g. an API's 400). */
const httpErrorLine = /^Failed to load resource: the server responded with a status of [45]\d\d/;

/**
 * A page that records its problems: page errors, CSP violations (the `securitypolicyviolation`
 * event, reported by a listener that runs before the page's own scripts and outside its CSP),
 * failed requests, console errors and warnings. `allowHttpErrors`: an API's 4xx/5xx answer the
 * page shows on purpose (a form's error) is no problem.
 */
export async function openPage(context: BrowserContext, options: { allowHttpErrors?: boolean } = {}): Promise<WatchedPage> {
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    const text = message.text();
    if (options.allowHttpErrors && httpErrorLine.test(text)) return;
    if (message.type() === 'error' || message.type() === 'warning' || /content security policy/i.test(text))
      problems.push(`console ${message.type()}: ${text}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (request) => problems.push(`request failed: ${request.method()} ${request.url()} ${request.failure()?.errorText}`));
  await page.exposeFunction('reportViolation', (violation: string) => problems.push(`CSP violation: ${violation}`));
  await page.addInitScript({
    content: `document.addEventListener('securitypolicyviolation', (e) => window.reportViolation(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));`,
  });
  return { page, problems };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * Runs axe-core on the page as it is now and fails, with a readable list, on any serious or
 * critical violation. axe is evaluated by the DevTools protocol, which the page's CSP does not
 * govern, so the page needs no looser policy for it.
 */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  await page.evaluate(axeSource);
  const results = await page.evaluate(() => {
    const scope = globalThis as unknown as { axe: { run(context: unknown, options: object): Promise<AxeResults> }; document: unknown };
    return scope.axe.run(scope.document, { resultTypes: ['violations'] });
  });
  const serious = results.violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.help} (${violation.nodes.map((node) => node.target.join(' ')).join('; ')})`);
  expect(serious, `axe-core on ${what}`).toEqual([]);
}
