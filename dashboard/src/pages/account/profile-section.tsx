import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { formatDate } from '../../format';
import { Link } from '../../router';
import { useSignedIn } from '../../session';

export function ProfileSection() {
  const { client, account, reloadAccount } = useSignedIn();
  const [fullName, setFullName] = useState(account.full_name ?? '');
  const [saved, setSaved] = useState(false);
  const submit = async () => {
    setSaved(false);
    await client.patch('/v1/account', { body: { full_name: fullName } });
    await reloadAccount();
    setSaved(true);
  };
  return (
    <Section title="Profile">
      <dl className="facts">
        <dt>Email address</dt>
        <dd>
          {account.email}{' '}
          {account.email_verified ? (
            <span className="badge ok">confirmed</span>
          ) : (
            <>
              <span className="badge warn">not confirmed</span> <Link to="/verify-email">Confirm it with the mailed token</Link>
            </>
          )}
        </dd>
        <dt>Member since</dt>
        <dd>{formatDate(account.created_at)}</dd>
        <dt>User id</dt>
        <dd>
          <code>{account.user_id}</code>
        </dd>
      </dl>
      <Form onSubmit={submit} submitLabel="Save name" busyLabel="Saving…" label="Profile">
        <Field
          name="full_name"
          label="Full name"
          autoComplete="name"
          hint="Shown to the members of your organizations; 1 to 200 characters."
          value={fullName}
          onChange={setFullName}
          required
        />
      </Form>
      {saved && <Notice>Your name is saved.</Notice>}
    </Section>
  );
}
