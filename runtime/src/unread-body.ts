import type http from 'node:http';
import type http2 from 'node:http2';

type ServerRequest = http.IncomingMessage | http2.Http2ServerRequest;

/** A 5-byte envelope of an empty message (gRPC, gRPC-Web, Connect streaming): flags 0, length 0. */
const emptyEnvelope = Buffer.alloc(5);

/** The encoding of an empty message in the request's own content type. */
function emptyMessage(contentType: string): Buffer {
  if (/^application\/(grpc|grpc-web|connect)\b/.test(contentType)) {
    // Connect streaming with JSON frames needs a JSON object in its envelope.
    if (/^application\/connect\+json/.test(contentType)) return Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from('{}')]);
    return emptyEnvelope;
  }
  return /json/.test(contentType) ? Buffer.from('{}') : Buffer.alloc(0);
}

/**
 * Makes connect read an empty message instead of the request's body, which stays unread: a
 * call refused before its body matters (no valid mesh token) costs no buffering and no
 * inflating, whatever it sends (a gzip bomb included), while connect still answers it in the
 * caller's protocol. Whatever of the body still arrives after the answer is discarded as it
 * comes (Node's HTTP/1.1 server does it for a body nobody read), never kept.
 */
export function replaceBodyWithEmptyMessage(req: ServerRequest): void {
  const contentType = String(req.headers['content-type'] ?? '');
  delete req.headers['content-encoding'];
  delete req.headers['connect-content-encoding'];
  const body = emptyMessage(contentType);
  Object.defineProperty(req, Symbol.asyncIterator, {
    value: async function* () {
      if (body.length > 0) yield body;
    },
  });
}
