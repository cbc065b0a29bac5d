import http from 'node:http';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import type { Logger } from '@switchboard/runtime/log';

/**
 * The data plane's routes (docs/api/front-door.md#routes) at the REST surface's base URL: the gateway forwards
 * `/v1/chat/completions` and `/v1/models` to the data plane as streams, both ways, so a
 * completion's events reach the client as the upstream sends them. The data plane decides on
 * the API key itself, from its replica of the key states (docs/money-path.md#replicas).
 */
export const dataPlanePaths = new Set(['/v1/chat/completions', '/v1/models']);

/** Request headers the data plane reads; nothing else crosses (no cookies, no hop-by-hop headers). */
const forwardedRequestHeaders = ['authorization', 'content-type', 'content-length', 'accept', 'x-service-conversation-id'];
/**
 * Response headers the client gets from the data plane (the gateway sets its own security headers,
 * and its own X-Service-Overhead-Ms). A JSON answer keeps its Content-Length: its body passes
 * through unchanged, so it need not be re-framed in chunks with a last empty one after it.
 */
/** The rate-limit headers of a key with limits (docs/api/front-door.md#rate-limits), OpenAI's names. */
const rateLimitHeaders = ['requests', 'tokens'].flatMap((kind) => ['limit', 'remaining', 'reset'].map((what) => `x-ratelimit-${what}-${kind}`));
const forwardedResponseHeaders = ['content-type', 'content-length', 'cache-control', 'retry-after', 'x-service-generation-id', ...rateLimitHeaders];

/**
 * X-Service-Overhead-Ms through the gateway (docs/api/front-door.md#responses): the time since the
 * gateway took the request, less the upstream's part the data plane reports, so the hop and the
 * data plane both count. Without that report (the data plane did not answer) all of it counts.
 */
function overheadMs(started: number, upstreamMs: string | string[] | undefined): string {
  const upstream = typeof upstreamMs === 'string' ? Number(upstreamMs) : 0;
  return (performance.now() - started - (Number.isFinite(upstream) ? upstream : 0)).toFixed(3);
}

export function createDataPlaneProxy(baseUrl: string, log: Logger, headersTimeoutMs: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const target = new URL(baseUrl);
  return (req: http.IncomingMessage, res: http.ServerResponse, pathname: string, requestId: string, clientIp: string | undefined): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const started = performance.now();
      const headers: Record<string, string> = { 'x-request-id': requestId };
      for (const name of forwardedRequestHeaders) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      if (clientIp) headers['x-forwarded-for'] = clientIp;
      const outgoing = http.request(
        { protocol: target.protocol, hostname: target.hostname, port: target.port, path: pathname, method: req.method, headers, agent },
        (incoming) => {
          const answer: Record<string, string> = {};
          for (const name of forwardedResponseHeaders) {
            const value = incoming.headers[name];
            if (typeof value === 'string') answer[name] = value;
          }
          answer['x-service-overhead-ms'] = overheadMs(started, incoming.headers['x-service-upstream-ms']);
          // An answer before the whole request arrived (a 413): the rest of the body is read and
          // dropped, and the connection closes after, so the client's next request is not stuck behind it.
          if (!req.complete) {
            answer.connection = 'close';
            req.unpipe(outgoing);
            req.resume();
          }
          res.writeHead(incoming.statusCode ?? 502, answer);
          // A stream's headers go at once (the client sees the response start); a JSON answer goes in one write.
          if (answer['content-type']?.startsWith('text/event-stream')) res.flushHeaders();
          incoming.pipe(res);
          incoming.on('end', resolve);
          incoming.on('error', () => {
            res.destroy();
            resolve();
          });
        },
      );
      // The client went away: so does the data plane's request (it stops the upstream and bills what was produced).
      res.on('close', () => {
        if (!res.writableFinished) outgoing.destroy();
        resolve();
      });
      // The data plane answers (its headers) after its mesh calls and the upstream's first byte: never a hang beyond that.
      const timer = setTimeout(() => outgoing.destroy(new Error('the data plane did not answer in time')), headersTimeoutMs);
      outgoing.once('response', () => clearTimeout(timer));
      outgoing.once('close', () => clearTimeout(timer));
      outgoing.on('error', (err) => {
        if (res.headersSent) {
          res.destroy();
          resolve();
          return;
        }
        log.warn({ err: err.message, request_id: requestId }, 'the data plane is unreachable');
        reject(
          catalogued(errorCatalogue.serviceUnavailable, { dependency: 'data plane' }, { headers: { 'X-Service-Overhead-Ms': overheadMs(started, undefined) } }),
        );
      });
      req.pipe(outgoing);
    });
}
