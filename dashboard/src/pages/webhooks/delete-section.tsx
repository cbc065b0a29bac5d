import { ConfirmAction } from '../../components/confirm-action';
import { Section } from '../../components/section';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';
import type { Webhook } from './webhook-status';

/** Deleting the endpoint with its delivery log. */
export function DeleteSection({ webhook }: { webhook: Webhook }) {
  const { client, workspace } = useSignedIn();
  const { navigate } = useRouter();
  const remove = async () => {
    await client.delete('/v1/workspaces/{workspace_id}/webhooks/{webhook_id}', {
      params: { path: { workspace_id: workspace.org_id, webhook_id: webhook.webhook_id } },
    });
    navigate('/webhooks');
  };
  return (
    <Section title="Delete the endpoint" danger>
      <p>Its delivery log goes with it, and deliveries not sent yet are never sent.</p>
      <ConfirmAction label="Delete endpoint" question={`Delete ${webhook.url} and its delivery log?`} confirmLabel="Delete" onConfirm={remove} />
    </Section>
  );
}
