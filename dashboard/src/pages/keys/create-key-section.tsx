import { useState } from 'react';
import type { KeyScope, RoutingPolicy } from '../../closed-sets';
import { CopyOnce } from '../../components/copy-once';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Section } from '../../components/section';
import { Link } from '../../router';
import { useSignedIn } from '../../session';
import { keyScopes } from './key-words';
import { routingPolicies } from './routing-policies';
import { ScopesField } from './scopes-section';

type Created = { keyId: string; name: string; fullKey: string };

const allScopes = keyScopes.map(({ scope }) => scope);

/**
 * A new key: its name, what it may do (all three scopes unless unticked), optionally a monthly
 * cap and a routing policy; its other limits are set on its page. The full key of the answer
 * is shown once, kept in this component's state only: it is gone when the page is left.
 */
export function CreateKeySection({ onCreated }: { onCreated(): void }) {
  const { client, workspace } = useSignedIn();
  const [name, setName] = useState('');
  const [cap, setCap] = useState('');
  const [routing, setRouting] = useState('any');
  const [scopes, setScopes] = useState<string[]>(allScopes);
  const [created, setCreated] = useState<Created>();
  const submit = async () => {
    const { full_key, key } = await client.post('/v1/keys', {
      body: { name, scopes: scopes as KeyScope[], routing_policy: routing as RoutingPolicy, ...(cap.trim() ? { monthly_spend_cap_usd: cap.trim() } : {}) },
    });
    if (!key) throw new Error('The key was created, but the answer did not describe it: find it in the list below.');
    setCreated({ keyId: key.key_id, name: key.name, fullKey: full_key });
    setName('');
    setCap('');
    setRouting('any');
    setScopes(allScopes);
    onCreated();
  };
  return (
    <Section title="Create a key">
      {created ? (
        <div className="created-key">
          <p>
            The key <strong>{created.name}</strong> is created in {workspace.name}. It acts as you, with your role in this workspace; send it as{' '}
            <code>Authorization: Bearer &lt;key&gt;</code>.
          </p>
          <CopyOnce
            label="Your new API key"
            value={created.fullKey}
            warning="Copy it now and keep it somewhere safe: only its hash is stored, so it cannot be shown again. If it is lost, revoke it and create another."
          />
          <div className="button-row">
            <button type="button" className="button primary" onClick={() => setCreated(undefined)}>
              I have copied it
            </button>
            <Link to={`/keys/${created.keyId}`}>Settings of {created.name}</Link>
          </div>
        </div>
      ) : (
        <Form onSubmit={submit} submitLabel="Create key" busyLabel="Creating…" label="Create a key">
          <Field name="name" label="Name" hint="1 to 100 characters, e.g. Production." value={name} onChange={setName} required />
          <Field
            name="monthly_spend_cap_usd"
            label="Monthly spend cap in USD"
            hint="The key is refused once its spend this month (UTC) reaches it; 0 blocks it. Leave empty for no cap."
            inputMode="decimal"
            value={cap}
            onChange={setCap}
          />
          <ScopesField value={scopes} onChange={setScopes} />
          <Field name="routing_policy" label="Where its requests may be served" options={routingPolicies} value={routing} onChange={setRouting} required />
        </Form>
      )}
    </Section>
  );
}
