import { useState } from 'react';
import { Checkbox } from '../components/checkbox';
import { CopyOnce } from '../components/copy-once';
import { Field } from '../components/field';
import { Form, fieldError } from '../components/form';
import { Money } from '../components/money';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { can } from '../permissions';
import { Link } from '../router';
import { useSignedIn } from '../session';
import { type Completion, sendChat } from './playground/chat';

const otherModel = 'other';
const modelChoices = [
  { value: 'service/fast', label: 'service/fast: the service picks a fast, cheap model' },
  { value: 'service/balanced', label: 'service/balanced: the service picks a stronger model' },
  { value: otherModel, label: 'A model by its id…' },
];

/**
 * A chat request through the front door with one of the workspace's API keys, showing the answer
 * and the `service` object (generation id, tier, model, region, cost). The key is held in this
 * page's state only, never stored: leaving the page forgets it. Without a key at hand, one can be
 * created here (shown once, like on the Keys page).
 */
export function PlaygroundPage() {
  const { role, workspace } = useSignedIn();
  const [apiKey, setApiKey] = useState('');
  const [choice, setChoice] = useState('service/fast');
  const [modelId, setModelId] = useState('');
  const [message, setMessage] = useState('');
  const [stream, setStream] = useState(false);
  const [completion, setCompletion] = useState<Completion>();
  const [streaming, setStreaming] = useState(false);
  const send = async () => {
    const key = apiKey.trim();
    if (!key) throw fieldError('api_key', 'Paste an API key of this workspace, or create a playground key below.');
    const model = choice === otherModel ? modelId.trim() : choice;
    if (!model) throw fieldError('model', 'Give the id of a model (the Models page lists them).');
    if (!message.trim()) throw fieldError('messages', 'Write a message to send.');
    setCompletion(undefined);
    const onDelta = stream ? (answer: string) => setCompletion({ answer, model }) : undefined;
    setStreaming(stream);
    try {
      setCompletion(await sendChat(key, model, message, { signal: AbortSignal.timeout(120_000), onDelta }));
    } finally {
      setStreaming(false);
    }
  };
  return (
    <Page title="Playground">
      <p>
        Send a chat request to <code>/v1/chat/completions</code> with an API key of {workspace.name}, exactly as your code would. It is billed like any request
        and shows in the <Link to="/activity">Activity</Link>.
      </p>
      <Section title="Request">
        <Form onSubmit={send} submitLabel="Send" busyLabel="Waiting for the answer…" label="Chat request">
          <Field
            name="api_key"
            label="API key"
            type="password"
            autoComplete="off"
            spellCheck={false}
            hint="Kept in this page's memory only: never stored, forgotten when you leave the page."
            value={apiKey}
            onChange={setApiKey}
            required
          />
          <Field name="model_choice" label="Model" value={choice} onChange={setChoice} options={modelChoices} required />
          {choice === otherModel && (
            <Field name="model" label="Model id" hint={<Link to="/models">The Models page lists them.</Link>} value={modelId} onChange={setModelId} required />
          )}
          <Field name="messages" label="Message" rows={4} value={message} onChange={setMessage} required />
          <Checkbox name="stream" label="Stream the answer (its text shows as it comes)" checked={stream} onChange={setStream} />
        </Form>
      </Section>
      {completion && <Answer completion={completion} streaming={streaming} />}
      {can(role, 'keys.create') && <PlaygroundKeySection onCreated={setApiKey} />}
    </Page>
  );
}

function Answer({ completion, streaming }: { completion: Completion; streaming: boolean }) {
  const { service, usage } = completion;
  return (
    <Section title="Answer">
      <div className="chat-answer" data-testid="playground-answer">
        {completion.answer || <span className="muted">(an empty answer)</span>}
      </div>
      {service ? (
        <dl className="facts" data-testid="playground-service">
          <dt>Generation</dt>
          <dd>
            <code>{service.generation_id}</code>
          </dd>
          <dt>Tier</dt>
          <dd>{service.tier}</dd>
          <dt>Served by</dt>
          <dd>
            <code>{service.routed_model}</code>
          </dd>
          <dt>Region</dt>
          <dd>{service.region}</dd>
          <dt>Cost</dt>
          <dd>
            <Money amount={service.cost_usd} />
          </dd>
          {usage && (
            <>
              <dt>Tokens in / out</dt>
              <dd>
                {usage.prompt_tokens} / {usage.completion_tokens}
              </dd>
            </>
          )}
        </dl>
      ) : (
        <p className="muted">{streaming ? 'Streaming: the service object comes with the last chunk.' : 'The answer carried no service object.'}</p>
      )}
    </Section>
  );
}

/** A key for trying things here: created with the user's role, shown once, and put in the form above. */
function PlaygroundKeySection({ onCreated }: { onCreated(fullKey: string): void }) {
  const { client } = useSignedIn();
  const [created, setCreated] = useState<{ name: string; fullKey: string; keyId: string }>();
  const create = async () => {
    const { full_key, key } = await client.post('/v1/keys', { body: { name: `Playground ${new Date().toISOString().slice(0, 10)}` } });
    setCreated({ name: key?.name ?? 'Playground', fullKey: full_key, keyId: key?.key_id ?? '' });
    onCreated(full_key);
  };
  return (
    <Section title="No key at hand?">
      {created ? (
        <>
          <p>
            The key <strong>{created.name}</strong> is created and filled in above. {created.keyId && <Link to={`/keys/${created.keyId}`}>Its settings</Link>}
            {created.keyId && ' (a cap, revocation) are on its page.'}
          </p>
          <CopyOnce
            label="Your playground key"
            value={created.fullKey}
            warning="Copy it now to use it elsewhere: only its hash is stored, so it cannot be shown again."
          />
        </>
      ) : (
        <Form onSubmit={create} submitLabel="Create a playground key" busyLabel="Creating…" label="Create a playground key">
          <p className="hint">A new API key of this workspace that acts as you. Revoke it on the Keys page when you are done.</p>
        </Form>
      )}
    </Section>
  );
}
