import type http from 'node:http';

/**
 * A request body of at most `maxBytes`. Beyond that the rest is read and dropped (so the 413 can
 * still be answered on the same connection) and the promise rejects with `tooLarge()`; a
 * Content-Length over the limit is refused before anything is read.
 */
export function readBody(req: http.IncomingMessage, maxBytes: number, tooLarge: () => Error): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? 0) > maxBytes) {
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}
