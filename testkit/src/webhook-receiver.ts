import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { type Received, WebhookReceiver as Receiver } from '@switchboard/runtime/dev/webhook-receiver';
import { eventually } from '@switchboard/runtime/testing';
import { Webhook } from 'standardwebhooks';
import type { RestCall } from './mesh.js';
import { checkDeliveredPayload } from './webhook-payloads.js';

export type { Received, Reply } from '@switchboard/runtime/dev/webhook-receiver';

/** The tests' HTTPS webhook receiver: every body it gets is checked against the event catalog (webhook-payloads.ts). */
export type WebhookReceiver = Receiver;
export const WebhookReceiver = {
  start: (certificate: LocalCertificate): Promise<WebhookReceiver> =>
    Receiver.start(certificate, (request) => checkDeliveredPayload(request, `receiver path ${request.path}`)),
};

/** Verifies a received delivery the way a receiver author would, with the `standardwebhooks` package. */
export function verifyDelivery(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
}

/**
 * A receiver for the tests of the services that emit events: a test subscribes a workspace's
 * endpoint to the types it makes the system emit, so that each is delivered, and so checked
 * against the catalog, as well as asserted on. Boot the mesh with `env()` for the webhooks service
 * to reach it.
 */
export class EventTap {
  private paths = 0;

  private constructor(
    private readonly receiver: WebhookReceiver,
    private readonly certificate: LocalCertificate,
    private readonly dir: string,
  ) {}

  static async start(): Promise<EventTap> {
    const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-tap-'));
    const certificate = await createLocalCertificate(dir);
    return new EventTap(await WebhookReceiver.start(certificate), certificate, dir);
  }

  /** What the mesh needs to deliver to a receiver on this machine, trusting its certificate. */
  env(): Record<string, string> {
    return { WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true', NODE_EXTRA_CA_CERTS: this.certificate.certFile };
  }

  /** Registers an endpoint of the user's workspace subscribed to `events`, at a receiver path of its own. */
  async subscribe(call: RestCall, user: { token: string; workspaceId: string }, events: string[]): Promise<TapEndpoint> {
    const hookPath = `/tap-${++this.paths}`;
    const created = await call('POST', `/v1/workspaces/${user.workspaceId}/webhooks`, {
      token: user.token,
      body: { url: this.receiver.url(hookPath), events },
    });
    if (created.status !== 201) throw new Error(`could not subscribe ${user.workspaceId} to ${events.join(', ')}: ${created.status} ${created.text}`);
    const payloads = () => this.receiver.at(hookPath).map((request) => verifyDelivery(created.json.secret, request) as TapPayload);
    return {
      delivered: (type, match = () => true) =>
        eventually(() => payloads().find((payload) => payload.type === type && match(payload)), `${type} delivered to ${user.workspaceId}`, 10_000, 20),
      all: (type) => payloads().filter((payload) => payload.type === type),
    };
  }

  async close(): Promise<void> {
    await this.receiver.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}

export interface TapPayload {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

export interface TapEndpoint {
  /** The first delivery of `type` (that `match` accepts), once it has arrived. */
  delivered(type: string, match?: (payload: TapPayload) => boolean): Promise<TapPayload>;
  /** The deliveries of `type` arrived so far. */
  all(type: string): TapPayload[];
}
