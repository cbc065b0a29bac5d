import { useState } from 'react';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { localInputValue } from '../../format';
import { useSignedIn } from '../../session';
import type { Webhook } from './webhook-status';

/** Sending again every failed or exhausted delivery created since a time (after the receiver was down). */
export function RecoverSection({ webhook, onRecovered }: { webhook: Webhook; onRecovered(): void }) {
  const { client, workspace } = useSignedIn();
  const [since, setSince] = useState(() => localInputValue(new Date(Date.now() - 24 * 3600_000)));
  const [notice, setNotice] = useState<string>();
  const submit = async () => {
    setNotice(undefined);
    // A datetime-local value has no offset: Date reads it as the reader's local time.
    const instant = new Date(since);
    if (!since || Number.isNaN(instant.getTime())) throw fieldError('since', 'Give the date and time to recover from.');
    const { requeued } = await client.post('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/recover', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id } },
      body: { since: instant.toISOString() },
    });
    setNotice(
      requeued === 0 ? 'No failed delivery since then: nothing to send again.' : `${requeued} ${requeued === 1 ? 'delivery is' : 'deliveries are'} sent again.`,
    );
    onRecovered();
  };
  return (
    <Section title="Recover failed deliveries">
      <p>One more attempt now of every failed or exhausted delivery created since the time given, e.g. after the receiver was down. It uses up no retry.</p>
      <Form onSubmit={submit} submitLabel="Recover" busyLabel="Recovering…" label="Recover failed deliveries">
        <Field name="since" label="Created since" type="datetime-local" hint="Your local time; not in the future." value={since} onChange={setSince} required />
      </Form>
      {notice && <Notice>{notice}</Notice>}
    </Section>
  );
}
