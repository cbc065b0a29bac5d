/**
 * The test upstream of bench:data-plane in a process of its own (its CPU measured apart from the
 * load generator's): prints its base URL, answers "count" on stdin with the calls it got so far,
 * and exits when stdin closes. Started by upstream.ts.
 */
import { createInterface } from 'node:readline';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { answerTokens } from './settings.js';

async function upstreamChild(): Promise<void> {
  const upstream = await OpenAiUpstream.start();
  upstream.words = answerTokens;
  let calls = 0;
  // The upstream keeps every request for tests; here only their number matters.
  setInterval(() => {
    calls += upstream.requests.length;
    upstream.requests.length = 0;
  }, 200).unref();
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === 'count') {
      calls += upstream.requests.length;
      upstream.requests.length = 0;
      process.stdout.write(`${JSON.stringify({ calls })}\n`);
    }
  });
  lines.on('close', () => {
    void upstream.close().finally(() => process.exit(0));
  });
  process.stdout.write(`${JSON.stringify({ baseUrl: upstream.baseUrl })}\n`);
}

upstreamChild().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
