import { useState } from 'react';
import type { EventType } from '../../closed-sets';
import { Checkbox } from '../../components/checkbox';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import { type EventsChoice, EventsField, eventsChoiceOf, eventsOf } from './events-field';
import { UrlField } from './url-field';
import type { Webhook } from './webhook-status';

const sameTypes = (a: string[], b: string[]) => a.length === b.length && a.every((type) => b.includes(type));

/**
 * Editing the URL, description, events and enabled flag. Only what changed is sent: the API
 * resets the failure clock on any `url` it is sent, so an unchanged URL is left out.
 */
export function SettingsSection({ webhook, onSaved }: { webhook: Webhook; onSaved(webhook: Webhook): void }) {
  const { client, workspace } = useSignedIn();
  const [url, setUrl] = useState(webhook.url);
  const [description, setDescription] = useState(webhook.description ?? '');
  const [events, setEvents] = useState<EventsChoice>(eventsChoiceOf(webhook.events));
  const [enabled, setEnabled] = useState(webhook.enabled);
  const [notice, setNotice] = useState<string>();
  const submit = async () => {
    setNotice(undefined);
    const chosen = eventsOf(events);
    if (!chosen) throw fieldError('events', 'Tick at least one event type, or every event type.');
    const changes = {
      ...(url.trim() !== webhook.url ? { url: url.trim() } : {}),
      ...(description !== (webhook.description ?? '') ? { description } : {}),
      ...(!sameTypes(chosen, webhook.events) ? { events: chosen as EventType[] } : {}),
      ...(enabled !== webhook.enabled ? { enabled } : {}),
    };
    if (Object.keys(changes).length === 0) {
      setNotice('Nothing changed.');
      return;
    }
    const saved = await client.patch('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id } },
      body: changes,
    });
    setUrl(saved.url);
    setEnabled(saved.enabled);
    onSaved(saved);
    setNotice('The endpoint is saved.');
  };
  return (
    <Section title="Settings">
      <Form onSubmit={submit} submitLabel="Save changes" busyLabel="Saving…" label="Endpoint settings">
        <UrlField value={url} onChange={setUrl} hint="https:// only; a new URL restarts the failure clock." />
        <Field name="description" label="Description" hint="Up to 1,000 characters; empty removes it." rows={2} value={description} onChange={setDescription} />
        <EventsField value={events} onChange={setEvents} />
        <Checkbox
          name="enabled"
          label="Enabled: deliver events to this endpoint (while disabled, new events are never sent to it and its retries wait)"
          checked={enabled}
          onChange={setEnabled}
        />
      </Form>
      {notice && <Notice>{notice}</Notice>}
    </Section>
  );
}
