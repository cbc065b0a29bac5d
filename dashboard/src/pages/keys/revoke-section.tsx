import { ConfirmAction } from '../../components/confirm-action';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';
import type { KeySectionProps } from '../key-page';

export function RevokeSection({ keyRecord, onChanged }: KeySectionProps) {
  const { client } = useSignedIn();
  const revoke = async () => {
    await client.delete('/v1/keys/{key_id}', { params: { path: { key_id: keyRecord.key_id } } });
    onChanged();
  };
  return (
    <Section title="Revoke the key" danger>
      <p>Within a second the key is refused everywhere. It stays listed for audit and cannot be changed or used again.</p>
      <ConfirmAction
        label="Revoke key"
        target={keyRecord.name}
        question={
          <>
            Revoke <strong>{keyRecord.name}</strong> (<code>{keyRecord.hint}</code>)? Programs using it stop working at once.
          </>
        }
        confirmLabel="Yes, revoke it"
        onConfirm={revoke}
      />
    </Section>
  );
}
