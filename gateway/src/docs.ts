import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LONG_CACHE, memoize, type StaticFile, sendStaticError, sendStaticFile, staticFile } from './static-files.js';

/**
 * GET /docs: Swagger UI rendering /v1/openapi.json, with every asset served by the gateway
 * itself from the swagger-ui-dist package (no CDN, no network). Only whitelisted files are
 * served, so no request path ever reaches the file system.
 */

const DOCS_PREFIX = '/docs';
const ASSETS_PREFIX = '/docs/assets/';
const SPEC_URL = '/v1/openapi.json';

/** Files of swagger-ui-dist the page needs, with their content types. */
const distAssets: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

/** The initializer: a file, not an inline script, so the CSP needs no 'unsafe-inline' scripts. */
const INIT_JS = `"use strict";
window.ui = SwaggerUIBundle({
  url: ${JSON.stringify(SPEC_URL)},
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  defaultModelsExpandDepth: 0,
  displayRequestDuration: true,
});
`;

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const require = createRequire(import.meta.url);
let distDir: string | undefined;
let version = '';

function dist(): string {
  if (!distDir) {
    const pkgPath = require.resolve('swagger-ui-dist/package.json');
    distDir = path.dirname(pkgPath);
    version = (require(pkgPath) as { version: string }).version;
  }
  return distDir;
}

function html(assetVersion: string): string {
  const v = encodeURIComponent(assetVersion);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard API</title>
<link rel="stylesheet" href="${ASSETS_PREFIX}swagger-ui.css?v=${v}">
<link rel="icon" type="image/png" sizes="32x32" href="${ASSETS_PREFIX}favicon-32x32.png?v=${v}">
<link rel="icon" type="image/png" sizes="16x16" href="${ASSETS_PREFIX}favicon-16x16.png?v=${v}">
<style>body{margin:0;background:#fafafa}</style>
</head>
<body>
<div id="swagger-ui"></div>
<noscript><p>The API reference needs JavaScript. The OpenAPI document is at <a href="${SPEC_URL}">${SPEC_URL}</a>.</p></noscript>
<script src="${ASSETS_PREFIX}swagger-ui-bundle.js?v=${v}"></script>
<script src="${ASSETS_PREFIX}init.js?v=${v}"></script>
</body>
</html>
`;
}

/** Assets are versioned in the page's URLs (?v=), so browsers may keep them for long (LONG_CACHE). */
const cached = memoize(async (name: string): Promise<StaticFile> => {
  if (name === 'index.html') {
    dist();
    const init = createHash('sha256').update(INIT_JS).digest('hex').slice(0, 8);
    return staticFile(Buffer.from(html(`${version}-${init}`)), 'text/html; charset=utf-8', 'no-cache');
  }
  if (name === 'init.js') return staticFile(Buffer.from(INIT_JS), 'text/javascript; charset=utf-8', LONG_CACHE);
  const contentType = distAssets[name];
  if (!contentType) throw new Error(`not a docs asset: ${name}`);
  return staticFile(await readFile(path.join(dist(), name)), contentType, LONG_CACHE);
});

/** The whitelisted asset a path names, or undefined when the path is not a docs path. */
function resolve(pathname: string): string | undefined {
  if (pathname === DOCS_PREFIX || pathname === `${DOCS_PREFIX}/`) return 'index.html';
  if (!pathname.startsWith(ASSETS_PREFIX)) return undefined;
  const name = pathname.slice(ASSETS_PREFIX.length);
  if (name === 'init.js' || Object.hasOwn(distAssets, name)) return name;
  return undefined;
}

/**
 * Serves GET /docs and GET /docs/assets/<file>; returns false (writing nothing) when the
 * path is not one of them, so the caller answers it (usually 404).
 */
export async function handleDocs(pathname: string, res: http.ServerResponse): Promise<boolean> {
  const name = resolve(pathname);
  if (!name) return false;

  const method = res.req?.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    sendStaticError(res, 405, 'method_not_allowed', `${method} is not allowed here; use GET.`);
    return true;
  }

  let file: StaticFile;
  try {
    file = await cached(name);
  } catch {
    sendStaticError(res, 503, 'docs_unavailable', 'The API reference page is not available on this server.');
    return true;
  }
  sendStaticFile(res, file, name === 'index.html' ? { 'Content-Security-Policy': CSP, 'X-Frame-Options': 'DENY' } : {});
  return true;
}
