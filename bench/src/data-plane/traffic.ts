import http from 'node:http';
import type { BenchSession } from '../measure/session.js';
import { type Call, drive, Ledger, type Run, summarize, type Watch } from './drive.js';
import { inspect, send, type Variant } from './requests.js';
import { answerTokens, concurrency, passthroughModel } from './settings.js';
import type { DataPlaneWorld } from './world.js';

const messages = [{ role: 'user', content: 'Say hello to the benchmark, briefly.' }];

/** The request of a variant: the same both ways but for what the data plane adds to a stream it sends upstream. */
const bodyOf = (variant: Variant) =>
  JSON.stringify({
    model: variant.model,
    messages,
    max_tokens: answerTokens,
    ...(variant.stream ? { stream: true } : {}),
    // What the data plane adds to every stream it sends upstream: the same upstream work both ways.
    ...(variant.stream && variant.through === 'direct' ? { stream_options: { include_usage: true } } : {}),
  });

/**
 * Chat completions sent straight to the upstream (direct) and through the front door (the
 * gateway with the API key), over a keep-alive agent per target with the same settings; counts
 * the requests each way and sums the costs the front door answered.
 */
export class Traffic {
  readonly variants = {
    direct: { name: 'direct (upstream)', through: 'direct', model: passthroughModel, stream: false },
    front: { name: `front door, ${passthroughModel}`, through: 'front door', model: passthroughModel, stream: false },
    directStream: { name: 'direct (upstream), stream', through: 'direct', model: passthroughModel, stream: true },
    frontStream: { name: `front door, ${passthroughModel}, stream`, through: 'front door', model: passthroughModel, stream: true },
    fast: { name: 'front door, service/fast', through: 'front door', model: 'service/fast', stream: false },
  } satisfies Record<string, Variant>;
  /** What the front door answered it cost. */
  readonly ledger = new Ledger();
  private readonly directLedger = new Ledger();
  frontRequestsSent = 0;
  directRequestsSent = 0;
  private readonly directAgent = new http.Agent({ keepAlive: true, maxSockets: concurrency, keepAliveMsecs: 1000 });
  private readonly frontAgent = new http.Agent({ keepAlive: true, maxSockets: concurrency, keepAliveMsecs: 1000 });
  private readonly directUrl: URL;
  private readonly frontUrl: URL;

  constructor(
    session: BenchSession,
    private readonly world: DataPlaneWorld,
  ) {
    session.defer('http agents', async () => {
      this.directAgent.destroy();
      this.frontAgent.destroy();
    });
    this.directUrl = new URL(`${world.upstream.baseUrl}/chat/completions`);
    this.frontUrl = new URL(`${world.mesh.gatewayUrl}/v1/chat/completions`);
  }

  private senderOf(variant: Variant): Call {
    const body = bodyOf(variant);
    const authorization = `Bearer ${this.world.account.fullKey}`;
    const sendIt =
      variant.through === 'direct'
        ? () => send(this.directAgent, this.directUrl, {}, body)
        : () => send(this.frontAgent, this.frontUrl, { authorization }, body);
    return async () => {
      const answer = await sendIt();
      return { status: String(answer.status), inspect: () => inspect(variant, answer) };
    };
  }

  /** `inFlight` loops of `variant` for `seconds` (drive.ts), counted. */
  async run(variant: Variant, seconds: number, inFlight: number, watch?: Watch, pauseMs = 0): Promise<Run> {
    const ledger = variant.through === 'direct' ? this.directLedger : this.ledger;
    const result = await drive(variant.name, this.senderOf(variant), ledger, seconds, inFlight, watch, pauseMs);
    const sent = result.ok + Object.values(result.failures).reduce((sum, count) => sum + count, 0);
    if (variant.through === 'direct') this.directRequestsSent += sent;
    else this.frontRequestsSent += sent;
    return result;
  }

  /** Direct, front, front, direct, `seconds` each: drift of the host weighs on both alike. */
  async interleaved(direct: Variant, front: Variant, seconds: number, inFlight: number, watch: Watch) {
    const d1 = await this.run(direct, seconds, inFlight, watch);
    const f1 = await this.run(front, seconds, inFlight, watch);
    const f2 = await this.run(front, seconds, inFlight, watch);
    const d2 = await this.run(direct, seconds, inFlight, watch);
    return { direct: summarize([d1, d2]), front: summarize([f1, f2]) };
  }

  /** One request of each variant, a complete 200, and the upstream got exactly one call for each, before any load. */
  async checkFirstRequests(): Promise<void> {
    for (const variant of Object.values(this.variants)) {
      const first = await this.run(variant, 0.001, 1);
      if (first.ok === 0 || first.firstProblem) throw new Error(`the first request failed: ${first.firstProblem}`);
    }
    const upstreamCallsBefore = await this.world.upstream.calls();
    if (upstreamCallsBefore !== this.directRequestsSent + this.frontRequestsSent)
      throw new Error(`the upstream got ${upstreamCallsBefore} calls for ${this.directRequestsSent + this.frontRequestsSent} requests`);
  }
}
