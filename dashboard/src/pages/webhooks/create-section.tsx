import { useState } from 'react';
import type { EventType } from '../../closed-sets';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Section } from '../../components/section';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { type EventsChoice, EventsField, eventsOf } from './events-field';
import { UrlField } from './url-field';
import type { Webhook } from './webhook-status';

/**
 * Registering an endpoint. Its signing secret is in this answer only: it is shown once, kept in
 * this component's state, and gone when the page is left.
 */
export function CreateSection({ onCreated }: { onCreated(): void }) {
  const { client, workspace } = useSignedIn();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<EventsChoice>({ all: true, types: [] });
  const [created, setCreated] = useState<Webhook>();
  const submit = async () => {
    setCreated(undefined);
    const chosen = eventsOf(events);
    if (!chosen) throw fieldError('events', 'Tick at least one event type, or every event type.');
    const webhook = await client.post('/v1/workspaces/{workspace_id}/webhooks', {
      params: { path: { workspace_id: workspace.org_id } },
      body: { url: url.trim(), events: chosen as EventType[], ...(description.trim() ? { description } : {}) },
    });
    setCreated(webhook);
    setUrl('');
    setDescription('');
    setEvents({ all: true, types: [] });
    onCreated();
  };
  return (
    <Section title="Add an endpoint">
      {created?.secret && (
        <div className="created">
          <p>
            <strong>{created.url}</strong> is registered and receives events from now on.{' '}
            <Link to={`/webhooks/${encodeURIComponent(created.webhook_id)}`}>Open the endpoint</Link> to send a test.
          </p>
          <CopyOnce
            label="Signing secret"
            value={created.secret}
            warning="Your receiver verifies every delivery's signature with it: copy it now, it cannot be shown again (rotate it if it is lost)."
          />
        </div>
      )}
      <Form onSubmit={submit} submitLabel="Add endpoint" busyLabel="Adding…" label="Add an endpoint">
        <UrlField value={url} onChange={setUrl} hint="https:// only, at most 2,048 characters; it must resolve to a public address when deliveries are sent." />
        <Field
          name="description"
          label="Description"
          hint="A note for people, up to 1,000 characters."
          rows={2}
          value={description}
          onChange={setDescription}
        />
        <EventsField value={events} onChange={setEvents} />
      </Form>
    </Section>
  );
}
