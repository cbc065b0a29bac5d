import type { JsonObject } from '@bufbuild/protobuf';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type EventEnvelopeJson, parseEventEnvelope } from '@switchboard/runtime/consumer';
import { newId } from '@switchboard/runtime/ids';
import { buildEventPayload } from '@switchboard/runtime/outbox';
import { requireEnv } from '@switchboard/runtime/testing';

/**
 * The test run's event stream, as other components see it: events published the way a
 * producer's outbox relay publishes them (the envelope, subject `<prefix>.<type>`, Nats-Msg-Id =
 * event id), and events observed on their subjects.
 */
export class EventBus {
  private constructor(private readonly nc: NatsConnection) {}

  static async connect(): Promise<EventBus> {
    return new EventBus(await connect({ servers: requireEnv('NATS_URL'), timeout: 5000 }));
  }

  private subject(type: string): string {
    return `${requireEnv('EVENTS_SUBJECT_PREFIX')}.${type}`;
  }

  /**
   * Publishes an event as `producer` would; with `redeliver`, publishes it a second time without
   * the deduplication header, so the stream holds it twice (as after a relay that crashed between
   * publishing and marking the row): consumers must count it once.
   */
  async publish(
    type: string,
    workspaceId: string,
    data: JsonObject,
    options: { producer?: string; occurredAt?: Date; redeliver?: boolean } = {},
  ): Promise<string> {
    const eventId = newId('evt');
    const payload = JSON.stringify(buildEventPayload(eventId, { type, workspaceId, data }, options.producer ?? 'billing', options.occurredAt));
    const js = jetstream(this.nc);
    await js.publish(this.subject(type), payload, { msgID: eventId });
    if (options.redeliver) await js.publish(this.subject(type), payload);
    return eventId;
  }

  /** Publishes a body as it is on `<prefix>.<type>` (what a producer outside the mesh may send). */
  async publishRaw(type: string, body: string): Promise<void> {
    await jetstream(this.nc).publish(this.subject(type), body);
  }

  /** Every event of `pattern` (a type, or `key.>`) published from now on, in arrival order. */
  observe(pattern: string): EventEnvelopeJson[] {
    const seen: EventEnvelopeJson[] = [];
    this.nc.subscribe(this.subject(pattern), {
      callback: (err, msg) => {
        if (!err) seen.push(parseEventEnvelope(msg.data));
      },
    });
    return seen;
  }

  /** Waits until what was subscribed so far is registered by the server. */
  flush(): Promise<void> {
    return this.nc.flush();
  }

  close(): Promise<void> {
    return this.nc.close();
  }
}
