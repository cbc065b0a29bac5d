import { readdir, readFile } from 'node:fs/promises';
import type http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LONG_CACHE, memoize, type StaticFile, sendStaticError, sendStaticFile, staticFile } from './static-files.js';

/**
 * The web dashboard (the `dashboard/` package, built by Vite to `dashboard/dist`) under /app/,
 * from the API's own origin: the page calls the API without CORS, and its CSP allows scripts,
 * styles and connections to this origin only. Only files found in the build are served, so no
 * request path ever reaches the file system.
 */

const PREFIX = '/app/';

/** The page's policy: no inline script or style, no eval, nothing from another origin; QR codes are data: images. */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');
const pageHeaders = { 'Content-Security-Policy': CSP, 'X-Frame-Options': 'DENY' };

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

/** The dashboard's build folder, found through the workspace package (undefined when not installed). */
function defaultDistDir(): string | undefined {
  try {
    return path.join(path.dirname(createRequire(import.meta.url).resolve('@switchboard/dashboard/package.json')), 'dist');
  } catch {
    return undefined;
  }
}

/** The files of a build, by their path under /app/ (`index.html`, `assets/index-D4S93dxm.js`). */
async function listFiles(distDir: string): Promise<Set<string> | undefined> {
  try {
    const entries = await readdir(distDir, { recursive: true, withFileTypes: true });
    const files = new Set(
      entries.filter((entry) => entry.isFile()).map((entry) => path.relative(distDir, path.join(entry.parentPath, entry.name)).split(path.sep).join('/')),
    );
    return files.has('index.html') ? files : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A handler of GET /, /app and /app/…, serving the build in `distDir`:
 * - `/` and `/app` redirect (302) to `/app/`;
 * - a file of the build is answered with its ETag; those under `assets/` have a content hash in
 *   their name and are kept a year, the others are revalidated (`no-cache`);
 * - any other path without a dot is a page of the app: index.html (`no-cache`, with the CSP);
 * - a path with a dot that names no file returns false, so the caller answers its JSON 404.
 * It answers 503 `dashboard_unavailable` while the build is missing, and finds it once it is
 * there. The resolved value is the route to log and count the request under (bounded: never the raw path).
 */
export function createDashboardHandler(distDir = defaultDistDir()): (pathname: string, res: http.ServerResponse) => Promise<string | false> {
  let files: Promise<Set<string> | undefined> | undefined;
  const build = () => {
    files ??= distDir ? listFiles(distDir) : Promise.resolve(undefined);
    return files.then((found) => {
      if (!found) files = undefined; // not built yet: look again next time
      return found;
    });
  };
  const read = memoize(async (name: string): Promise<StaticFile> => {
    const contentType = contentTypes[path.posix.extname(name)] ?? 'application/octet-stream';
    const cacheControl = name.startsWith('assets/') ? LONG_CACHE : 'no-cache';
    return staticFile(await readFile(path.join(distDir ?? '', ...name.split('/'))), contentType, cacheControl);
  });

  return async (pathname, res) => {
    if (pathname === '/' || pathname === '/app') {
      res.statusCode = 302;
      res.setHeader('Location', PREFIX);
      res.setHeader('Cache-Control', 'no-cache');
      res.end();
      return pathname;
    }
    if (!pathname.startsWith(PREFIX)) return false;
    const found = await build();
    if (!found) {
      sendStaticError(res, 503, 'dashboard_unavailable', 'The dashboard is not built on this server: run `npm run build` (it writes dashboard/dist).');
      return '/app/*';
    }
    const rest = pathname.slice(PREFIX.length);
    if (rest.includes('.') && rest !== 'index.html') {
      if (!found.has(rest)) return false;
      sendStaticFile(res, await read(rest));
      return '/app/{file}';
    }
    sendStaticFile(res, await read('index.html'), pageHeaders);
    return '/app/*';
  };
}
