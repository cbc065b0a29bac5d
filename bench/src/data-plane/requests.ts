import http from 'node:http';
import { answerTokens, requestTimeoutMs } from './settings.js';

export interface Answer {
  status: number;
  body: string;
}

/** One request over `agent` (a POST when it has a body); the whole answer read (a stream to its end). */
export function send(agent: http.Agent, url: URL, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        hostname: url.hostname,
        port: url.port,
        path: url.pathname,
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        timeout: requestTimeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
        res.on('aborted', () => reject(new Error('the response was cut short')));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${requestTimeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

export interface Variant {
  name: string;
  /** Straight to the upstream, through the gateway, or to the data plane without the gateway. */
  through: 'direct' | 'front door' | 'data plane';
  model: string;
  stream: boolean;
  /** Sent with the account's key with every limit set (world.ts), instead of its key without any. */
  limited?: boolean;
}

export interface Outcome {
  /** undefined when the answer is what it should be. */
  problem?: string;
  /** The front door's `service.cost_usd`. */
  costUsd?: string;
  tier?: string;
}

/** What a complete answer must hold; the cost the front door answered. */
export function inspect(variant: Variant, answer: Answer): Outcome {
  if (answer.status !== 200) return { problem: `HTTP ${answer.status}: ${answer.body.slice(0, 300)}` };
  const front = variant.through !== 'direct';
  let final: { service?: { cost_usd?: unknown; tier?: unknown }; choices?: Array<{ message?: { content?: unknown } }> };
  if (!variant.stream) {
    try {
      final = JSON.parse(answer.body);
    } catch {
      return { problem: `not JSON: ${answer.body.slice(0, 300)}` };
    }
    if (typeof final.choices?.[0]?.message?.content !== 'string' || final.choices[0].message.content === '')
      return { problem: `no content: ${answer.body.slice(0, 300)}` };
  } else {
    if (!answer.body.endsWith('data: [DONE]\n\n')) return { problem: `the stream did not end with [DONE]: …${answer.body.slice(-300)}` };
    if (answer.body.includes('"error":')) return { problem: `an error event in the stream: …${answer.body.slice(-300)}` };
    const events = answer.body.split('\n\n').filter((event) => event !== '');
    // The events: a role chunk, a chunk per token, the finish chunk, the usage chunk, (front door: the service chunk), [DONE].
    const expected = answerTokens + 4 + (front ? 1 : 0);
    if (events.length !== expected) return { problem: `${events.length} events in the stream, expected ${expected}` };
    if (!front) return {};
    try {
      final = JSON.parse(events[events.length - 2].replace(/^data: /, ''));
    } catch {
      return { problem: `the last chunk is not JSON: ${events[events.length - 2].slice(0, 300)}` };
    }
  }
  if (!front) return {};
  const cost = final.service?.cost_usd;
  if (typeof cost !== 'string') return { problem: `no recorded cost in service: ${JSON.stringify(final.service)}` };
  return { costUsd: cost, tier: typeof final.service?.tier === 'string' ? final.service.tier : undefined };
}
