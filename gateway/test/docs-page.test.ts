import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { launchChromium } from '@switchboard/testkit/browser';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleDocs } from '../src/docs.js';
import { buildOpenApiDocument } from '../src/openapi.js';
import { buildRoutes } from '../src/routes.js';

/**
 * The API reference as a reader sees it: `/docs` in Debian's headless Chromium (CI installs it,
 * see .ci/run), rendering the document the gateway serves. An operation shows its own
 * description, an example request and response, and its error codes with example bodies.
 * `DOCS_SCREENSHOT=<file.png>` also saves the page with the operation open (the README's picture).
 */

const document = JSON.stringify(buildOpenApiDocument(buildRoutes()));

let server: http.Server;
let base: string;
let browser: Browser;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const { pathname } = new URL(req.url ?? '/', 'http://localhost');
    if (pathname === '/v1/openapi.json') {
      res.setHeader('Content-Type', 'application/json');
      res.end(document);
      return;
    }
    handleDocs(pathname, res).then(
      (handled) => {
        if (!handled) {
          res.statusCode = 404;
          res.end();
        }
      },
      () => {
        res.statusCode = 500;
        res.end();
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
});

describe('/docs in Chromium', () => {
  it('shows an operation with its description, examples and error codes', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${base}/docs`);
    const operation = page.locator('#operations-Auth-AuthService_Login');
    await operation.locator('.opblock-summary').first().click();
    const body = operation.locator('.opblock-body');
    // The description written in the proto, not boilerplate.
    await expect.poll(() => body.innerText(), { timeout: 15_000 }).toContain('With 2FA on, it is a challenge instead');
    const text = await body.innerText();
    // The example request, the example response and the access line.
    expect(text).toContain('"email": "ada@example.com"');
    expect(text).toContain('Access: public.');
    // Each status with its real codes, and an example body for them.
    for (const expected of ['401', 'invalid_credentials', '429', 'too_many_attempts', '503', 'service_unavailable', 'req_']) expect(text).toContain(expected);
    // No code invented from the pattern (Swagger UI's `azs0nx9zumk2…` when a response has no example).
    expect(text.match(/"code": "[a-z_]*[0-9][a-z0-9_]*"/g)).toBeNull();
    // The tag names the resource in words.
    await expect.poll(() => page.locator('#operations-tag-Auth').innerText()).not.toContain('AuthService');
    expect(violations).toEqual([]);
    if (process.env.DOCS_SCREENSHOT) {
      // The operation from its description down to its first error examples.
      const box = (await operation.boundingBox())!;
      await page.screenshot({
        path: process.env.DOCS_SCREENSHOT,
        fullPage: true,
        clip: { x: box.x, y: box.y, width: box.width, height: Math.min(box.height, 2000) },
      });
    }
    await page.close();
  });

  it('shows the limits and enums of a request body, and the webhooks', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${base}/docs`);
    const operation = page.locator('#operations-Key-KeyService_CreateKey');
    await operation.locator('.opblock-summary').first().click();
    const body = operation.locator('.opblock-section-request-body');
    await body.locator('button:has-text("Schema")').first().click({ timeout: 15_000 });
    // Limits read from the protos' rules, shown beside each property.
    await expect.poll(() => body.innerText(), { timeout: 15_000 }).toContain('≥ 1 characters');
    expect(await body.innerText()).toContain('≤ 4 items');
    expect(await body.innerText()).toContain('matches ^\\d{1,15}(\\.\\d{1,12})?$');
    // A closed set, once its property is opened.
    for (const name of ['routing_policy', 'scopes']) {
      const property = body.locator(
        `.json-schema-2020-12-property:has(> .json-schema-2020-12 > .json-schema-2020-12-head .json-schema-2020-12__title:text-is("${name}"))`,
      );
      await property.locator('button.json-schema-2020-12-expand-deep-button').first().click();
    }
    await expect.poll(() => body.innerText()).toContain('"overseas-only"');
    expect(await body.innerText()).toContain('"inference"');
    // The webhooks section lists the event types.
    const text = await page.locator('#swagger-ui').innerText();
    expect(text).toContain('Webhooks');
    expect(text).toContain('key.revoked');
    // The front door, beside the REST operations.
    expect(text).toContain('/v1/chat/completions');
    expect(text).toContain('/v1/models');
    await page.close();
  });
});
