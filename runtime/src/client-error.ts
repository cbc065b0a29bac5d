import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { ApiError } from './api-error.js';
import { catalogued, errorCatalogue } from './error-catalogue.js';
import { newId } from './ids.js';

/**
 * An HTTP server's answer to the requests Node refuses before any handler runs (malformed, headers
 * too large, too slow): the error body of docs/conventions.md#errors with a request id and
 * `Cache-Control: no-store`, not Node's bare status line. `render` shapes the body as the surface's
 * other errors are (the front door adds OpenAI's `type` and `param`); by default it is the
 * conventions' body as is. For a server's 'clientError' event.
 */
export function answerClientError(
  err: NodeJS.ErrnoException,
  socket: Duplex,
  render: (error: ApiError, requestId: string) => unknown = (error, requestId) => error.body(requestId),
): void {
  if (socket.writable && !socket.destroyed) {
    const error =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? catalogued(errorCatalogue.headersTooLarge)
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? catalogued(errorCatalogue.requestTimeout)
          : catalogued(errorCatalogue.invalidRequest, { problem: 'The request is not valid HTTP.' });
    const requestId = newId('req');
    const text = JSON.stringify(render(error, requestId));
    socket.end(
      `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status]}\r\nConnection: close\r\nCache-Control: no-store\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nX-Request-Id: ${requestId}\r\n\r\n${text}`,
    );
  }
  socket.destroy();
}
