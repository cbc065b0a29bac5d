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
 * Chat completions sent straight to the upstream (direct), through the front door (the gateway
 * with the API key) and to the data plane alone (the same key, without the gateway's hop), over
 * a keep-alive agent per target with the same settings; counts the requests each way and sums
 * the costs the platform answered.
 */
export class Traffic {
  readonly variants = {
    direct: { name: 'direct (upstream)', through: 'direct', model: passthroughModel, stream: false },
    front: { name: `front door, ${passthroughModel}`, through: 'front door', model: passthroughModel, stream: false },
    directStream: { name: 'direct (upstream), stream', through: 'direct', model: passthroughModel, stream: true },
    frontStream: { name: `front door, ${passthroughModel}, stream`, through: 'front door', model: passthroughModel, stream: true },
    fast: { name: 'front door, service/fast', through: 'front door', model: 'service/fast', stream: false },
    dataPlane: { name: `data plane alone, ${passthroughModel}`, through: 'data plane', model: passthroughModel, stream: false },
    frontLimited: {
      name: `front door, ${passthroughModel}, key with every limit`,
      through: 'front door',
      model: passthroughModel,
      stream: false,
      limited: true,
    },
  } satisfies Record<string, Variant>;
  /** What the front door (or the data plane alone) answered it cost, for the key without limits. */
  readonly ledger = new Ledger();
  /** The same for the key with every limit set. */
  readonly limitedLedger = new Ledger();
  private readonly directLedger = new Ledger();
  /** Requests sent each way. */
  readonly sent: Record<Variant['through'], number> = { direct: 0, 'front door': 0, 'data plane': 0 };
  private readonly targets: Record<Variant['through'], { agent: http.Agent; url: URL }>;

  constructor(
    session: BenchSession,
    private readonly world: DataPlaneWorld,
  ) {
    const target = (base: string) => ({
      agent: new http.Agent({ keepAlive: true, maxSockets: concurrency, keepAliveMsecs: 1000 }),
      url: new URL(`${base}/chat/completions`),
    });
    this.targets = {
      direct: target(world.upstream.baseUrl),
      'front door': target(`${world.mesh.gatewayUrl}/v1`),
      'data plane': target(`${world.mesh.env.DATA_PLANE_URL}/v1`),
    };
    session.defer('http agents', async () => {
      for (const { agent } of Object.values(this.targets)) agent.destroy();
    });
  }

  /** Requests that went upstream through the platform: the front door's and the data plane's alone. */
  get platformRequestsSent(): number {
    return this.sent['front door'] + this.sent['data plane'];
  }

  private senderOf(variant: Variant): Call {
    const body = bodyOf(variant);
    const { agent, url } = this.targets[variant.through];
    const { account } = this.world;
    const key = variant.limited ? account.limited.fullKey : account.fullKey;
    const headers: Record<string, string> = variant.through === 'direct' ? {} : { authorization: `Bearer ${key}` };
    return async () => {
      const answer = await send(agent, url, headers, body);
      return { status: String(answer.status), inspect: () => inspect(variant, answer) };
    };
  }

  /** `inFlight` loops of `variant` for `seconds` (drive.ts), counted. */
  async run(variant: Variant, seconds: number, inFlight: number, watch?: Watch, pauseMs = 0): Promise<Run> {
    const ledger = variant.through === 'direct' ? this.directLedger : variant.limited ? this.limitedLedger : this.ledger;
    const result = await drive(variant.name, this.senderOf(variant), ledger, seconds, inFlight, watch, pauseMs);
    this.sent[variant.through] += result.ok + Object.values(result.failures).reduce((sum, count) => sum + count, 0);
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
    const sent = this.sent.direct + this.platformRequestsSent;
    if (upstreamCallsBefore !== sent) throw new Error(`the upstream got ${upstreamCallsBefore} calls for ${sent} requests`);
  }
}
