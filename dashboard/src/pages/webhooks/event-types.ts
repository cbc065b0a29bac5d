import { useSignedIn } from '../../session';
import { type LoadState, useLoad } from '../../use-load';

/** One type of the event catalog (`GET /v1/webhook-event-types`, docs/webhooks.md#the-event-catalog). */
export interface EventType {
  type: string;
  description: string;
  schema: Record<string, unknown>;
  example: Record<string, unknown>;
}

/**
 * `webhook.test` goes only to the endpoint tested and `key.spend_alert` only to a key's alert URL:
 * neither comes through a subscription, so they are not offered.
 */
const notSubscribed = new Set(['webhook.test', 'key.spend_alert']);

/** The event types an endpoint can be subscribed to, from the API's catalog. */
export function useEventTypes(): LoadState<EventType[]> {
  const { client } = useSignedIn();
  return useLoad(async () => {
    const { data } = await client.get('/v1/webhook-event-types');
    return data.filter((entry) => !notSubscribed.has(entry.type));
  }, [client]);
}

/** An endpoint's subscription in words: `[]` is every type. */
export function describeEvents(events: string[]): string {
  return events.length === 0 ? 'Every event type' : events.join(', ');
}
