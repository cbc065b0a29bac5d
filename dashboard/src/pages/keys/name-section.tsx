import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

export function NameSection({ keyRecord, canManage, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const [name, setName] = useState(keyRecord.name);
  const [saved, setSaved] = useState(false);
  if (!canManage) return null;
  const submit = async () => {
    setSaved(false);
    await client.patch('/v1/keys/{key_id}', { params: { path: { key_id: keyRecord.key_id } }, body: { name } });
    setSaved(true);
    onChanged();
  };
  return (
    <Section title="Name">
      <Form onSubmit={submit} submitLabel="Rename" busyLabel="Renaming…" label="Rename the key">
        <Field name="name" label="Name" hint="1 to 100 characters." value={name} onChange={setName} required />
      </Form>
      {saved && <Notice>The key is renamed.</Notice>}
    </Section>
  );
}
