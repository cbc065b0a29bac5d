import { useId, useRef, useState } from 'react';
import type { KeyScope } from '../../closed-sets';
import { Form, useFieldError, useRegisterField } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';
import { keyScopes, scopesLabel } from './key-words';

/** What the key may do: inference, read and/or manage (at least one). */
export function ScopesSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [scopes, setScopes] = useState<string[]>(keyRecord.scopes);
  const [saved, setSaved] = useState(false);
  const submit = async () => {
    setSaved(false);
    await client.patch('/v1/keys/{key_id}', { params: { path: { key_id: keyRecord.key_id } }, body: { scopes: scopes as KeyScope[] } });
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Scopes">
      <p>
        The key may make: <strong data-testid="key-scopes">{scopesLabel(keyRecord.scopes) || 'nothing'}</strong>. A call outside its scopes is refused (403
        insufficient_scope).
      </p>
      {canManage && (
        <Form onSubmit={submit} submitLabel="Save scopes" busyLabel="Saving…" label="Scopes of the key">
          <ScopesField value={scopes} onChange={setScopes} />
        </Form>
      )}
      {saved && <Notice>The scopes are saved.</Notice>}
    </Section>
  );
}

/** The scopes as checkboxes, sent in the pages' order; an error naming `scopes` is shown (and focused) on the group. */
export function ScopesField({ value, onChange }: { value: string[]; onChange(value: string[]): void }) {
  const id = useId();
  const group = useRef<HTMLFieldSetElement>(null);
  useRegisterField('scopes', group);
  const error = useFieldError('scopes', 'Scopes');
  const toggle = (scope: string, checked: boolean) =>
    onChange(keyScopes.map((candidate) => candidate.scope).filter((candidate) => (candidate === scope ? checked : value.includes(candidate))));
  return (
    <fieldset
      ref={group}
      name="scopes"
      tabIndex={-1}
      className={error ? 'field-group invalid' : 'field-group'}
      aria-invalid={error ? true : undefined}
      aria-describedby={error ? `${id}-error` : undefined}
    >
      <legend>Scopes</legend>
      {keyScopes.map(({ scope, label, what }) => (
        <div key={scope} className="field checkbox">
          <input id={`${id}-${scope}`} type="checkbox" checked={value.includes(scope)} onChange={(event) => toggle(scope, event.target.checked)} />
          <label htmlFor={`${id}-${scope}`}>
            {label} <span className="hint">{what}</span>
          </label>
        </div>
      ))}
      {error && (
        <p id={`${id}-error`} className="field-error">
          {error}
        </p>
      )}
    </fieldset>
  );
}
