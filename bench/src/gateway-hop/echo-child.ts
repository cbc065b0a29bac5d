/**
 * The stand-in data plane of bench:gateway-hop, in a process of its own (its CPU measured apart
 * from the load generator's): `GET /v1/models` and `POST /v1/chat/completions` answered at once
 * with a fixed body, its Content-Length and the data plane's own headers, the request's body read
 * first; a body with `"stream":true` gets a stream whose first event goes at once and the rest
 * after `streamGapMs`. So calling it directly or through the gateway differs by the hop alone.
 * Prints its base URL, exits when stdin closes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { streamGapMs } from './settings.js';

const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'm-bench',
  choices: [{ index: 0, message: { role: 'assistant', content: 'w1 w2 w3 w4 w5 w6 w7 w8' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 9, completion_tokens: 8, total_tokens: 17 },
  service: { generation_id: 'gen_bench', tier: 'passthrough', routed_model: 'm-bench', region: 'overseas', cost_usd: '0.000001' },
});
const models = JSON.stringify({ object: 'list', data: [{ id: 'service/fast', object: 'model', created: 1_700_000_000, owned_by: 'switchboard' }] });
const event = (content: string) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] })}\n\n`;

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const headers = { 'x-service-generation-id': 'gen_bench', 'x-service-overhead-ms': '0.010', 'x-service-upstream-ms': '0.000' };
    if (req.method === 'POST' && Buffer.concat(chunks).includes('"stream":true')) {
      res.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8' });
      res.write(event('w1'));
      setTimeout(() => res.end(`${event(' w2')}data: [DONE]\n\n`), streamGapMs);
      return;
    }
    const body = req.method === 'POST' ? completion : models;
    res.writeHead(200, { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }).end(body);
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`);
});
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
