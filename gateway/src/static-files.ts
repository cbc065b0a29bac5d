import { createHash } from 'node:crypto';
import type http from 'node:http';

/**
 * Files the gateway serves itself (the API reference at /docs, the dashboard at /app/): each is
 * read once and kept in memory with its ETag, and answered with conditional GET support.
 */

export interface StaticFile {
  body: Buffer;
  contentType: string;
  etag: string;
  cacheControl: string;
}

/** For files whose URL changes with their content (a hash or ?v= in it): browsers keep them a year. */
export const LONG_CACHE = 'public, max-age=31536000, immutable';

export function staticFile(body: Buffer, contentType: string, cacheControl: string): StaticFile {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
  return { body, contentType, etag, cacheControl };
}

/** `load`, memoized per name; a failed load is forgotten, so the next request tries again. */
export function memoize(load: (name: string) => Promise<StaticFile>): (name: string) => Promise<StaticFile> {
  const cache = new Map<string, Promise<StaticFile>>();
  return (name) => {
    let entry = cache.get(name);
    if (!entry) {
      entry = load(name);
      entry.catch(() => cache.delete(name));
      cache.set(name, entry);
    }
    return entry;
  };
}

/** Answers `file` (304 when the request's If-None-Match has its ETag), with `headers` on top (a page's CSP). */
export function sendStaticFile(res: http.ServerResponse, file: StaticFile, headers: Record<string, string> = {}): void {
  res.setHeader('Content-Type', file.contentType);
  res.setHeader('Cache-Control', file.cacheControl);
  res.setHeader('ETag', file.etag);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);

  const ifNoneMatch = res.req?.headers['if-none-match'];
  if (ifNoneMatch?.split(',').some((tag) => tag.trim().replace(/^W\//, '') === file.etag)) {
    res.statusCode = 304;
    res.end();
    return;
  }
  res.statusCode = 200;
  res.setHeader('Content-Length', file.body.length);
  res.end(res.req?.method === 'HEAD' ? undefined : file.body);
}

/** The contract's error body (`{"error": {code, message, field, request_id}}`) from a static-file handler. */
export function sendStaticError(res: http.ServerResponse, status: number, code: string, message: string): void {
  const requestId = res.getHeader('x-request-id') ?? res.req?.headers['x-request-id'] ?? '';
  const body = JSON.stringify({ error: { code, message, field: null, request_id: String(requestId) } });
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.setHeader('Cache-Control', 'no-store');
  res.end(body);
}
