import { useState } from 'react';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { useSignedIn } from '../../session';
import type { Webhook } from './webhook-status';

const gracePeriods = [
  { value: '86400', label: '24 hours (the default)' },
  { value: '3600', label: '1 hour' },
  { value: '604800', label: '7 days' },
  { value: '0', label: 'None: the old secret stops signing at once' },
];

/** Rotating the signing secret: the new one is shown once, here, and forgotten when the page is left. */
export function SecretSection({ webhook }: { webhook: Webhook }) {
  const { client, workspace } = useSignedIn();
  const [grace, setGrace] = useState('86400');
  const [rotated, setRotated] = useState<{ secret: string; oldUntil: string | undefined }>();
  const submit = async () => {
    setRotated(undefined);
    const seconds = Number(grace);
    const answer = await client.post('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}/rotate-secret', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id } },
      body: { grace_period_seconds: seconds },
    });
    if (answer.secret) setRotated({ secret: answer.secret, oldUntil: seconds > 0 ? new Date(Date.now() + seconds * 1000).toISOString() : undefined });
  };
  return (
    <Section title="Signing secret">
      <p>
        Every delivery is signed with the endpoint's secret. Rotating it makes a new one; during the grace period each delivery carries both signatures, so the
        receiver can switch without missing one.
      </p>
      {rotated && (
        <CopyOnce
          label="New signing secret"
          value={rotated.secret}
          warning={
            rotated.oldUntil
              ? `Copy it now, it cannot be shown again. The old secret keeps signing too until about ${formatDateTime(rotated.oldUntil)}.`
              : 'Copy it now, it cannot be shown again. The old secret no longer signs.'
          }
        />
      )}
      <Form onSubmit={submit} submitLabel="Rotate secret" busyLabel="Rotating…" label="Rotate the signing secret">
        <Field name="grace_period_seconds" label="The old secret keeps signing for" value={grace} onChange={setGrace} options={gracePeriods} required />
      </Form>
    </Section>
  );
}
