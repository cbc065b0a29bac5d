import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { indexInList, retargetFieldError } from '../../error-fields';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

/** The record's `allowed_models` (typed by the OpenAPI document as a list of any values): the patterns, or null for every model. */
export function allowedModelsOf(value: unknown[] | null): string[] | null {
  return value === null ? null : value.map(String);
}

/**
 * The models the key may use: patterns, one a line, where `*` matches any run of characters
 * (`service/*`); none means every model. Another model is refused before any upstream call.
 */
export function AllowedModelsSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const current = allowedModelsOf(keyRecord.allowed_models);
  const [text, setText] = useState((current ?? []).join('\n'));
  const [saved, setSaved] = useState(false);
  const submit = async () => {
    setSaved(false);
    // Blank lines are spacing, not patterns; every other line goes as typed (the API trims and checks it).
    const lines = text.split('\n').filter((line) => line.trim() !== '');
    try {
      await client.patch('/v1/keys/{key_id}', { params: { path: { key_id: keyRecord.key_id } }, body: { allowed_models: lines.length ? lines : null } });
    } catch (error) {
      // `allowed_models[i]` is the i-th line sent: the message says which line, the textarea holds it.
      throw retargetFieldError(error, (field) => {
        const index = indexInList(field, 'allowed_models');
        return index === undefined ? undefined : { field: 'allowed_models', mention: `Line ${index + 1} of allowed_models` };
      });
    }
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Allowed models">
      {current === null ? (
        <p>The key may use every model.</p>
      ) : (
        <>
          <p>The key may use only the models matching one of these patterns; another model is refused (403 model_not_allowed).</p>
          <ul className="patterns" data-testid="allowed-models">
            {current.map((pattern) => (
              <li key={pattern}>
                <code>{pattern}</code>
              </li>
            ))}
          </ul>
        </>
      )}
      {canManage && (
        <Form onSubmit={submit} submitLabel="Save models" busyLabel="Saving…" label="Allowed models of the key">
          <Field
            name="allowed_models"
            label="Allowed models"
            hint="One pattern a line, matched against the whole model id; * matches any run of characters (service/*). Up to 50. Empty: every model."
            rows={4}
            spellCheck={false}
            value={text}
            onChange={setText}
          />
        </Form>
      )}
      {saved && <Notice>The allowed models are saved.</Notice>}
    </Section>
  );
}
