import { useState } from 'react';
import type { RoutingPolicy } from '../../closed-sets';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { routingPolicies, routingPolicyLabel } from './routing-policies';

/** Where the key's model requests may be served (the API's geographic routing policy). */
export function RoutingSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [policy, setPolicy] = useState<string>(keyRecord.routing_policy);
  const [saved, setSaved] = useState(false);
  const submit = async () => {
    setSaved(false);
    await client.put('/v1/keys/{key_id}/routing-policy', { params: { path: { key_id: keyRecord.key_id } }, body: { routing_policy: policy as RoutingPolicy } });
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Routing">
      <p>
        Requests with this key may be served by: <strong>{routingPolicyLabel(keyRecord.routing_policy)}</strong>. A change applies from the key's next request.
      </p>
      {canManage && (
        <Form onSubmit={submit} submitLabel="Save routing" busyLabel="Saving…" label="Routing policy">
          <Field name="routing_policy" label="Serve requests with" options={routingPolicies} value={policy} onChange={setPolicy} required />
        </Form>
      )}
      {saved && <Notice>The routing policy is saved.</Notice>}
    </Section>
  );
}
