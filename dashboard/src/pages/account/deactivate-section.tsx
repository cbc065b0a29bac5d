import { useState } from 'react';
import { Checkbox } from '../../components/checkbox';
import { CodeField } from '../../components/code-field';
import { Field } from '../../components/field';
import { Form, fieldError } from '../../components/form';
import { Section } from '../../components/section';
import { formatDate } from '../../format';
import { useRouter } from '../../router';
import { useSignedIn } from '../../session';

/** Deactivation (the right to erasure), with what it does spelled out (identity.proto, DeactivateAccount) and a confirmation. */
export function DeactivateSection() {
  const { client, account, ended } = useSignedIn();
  const { navigate } = useRouter();
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [confirmed, setConfirmed] = useState(false);
  const submit = async () => {
    if (!confirmed) throw fieldError('confirm', 'Tick the box to confirm that you want to deactivate the account.');
    const body = account.two_factor_enabled ? { password, code: code.trim() } : { password };
    const { erase_after } = await client.post('/v1/account/deactivate', { body });
    ended(`Your account is deactivated and every session has ended. Its email address and name will be erased on ${formatDate(erase_after)}.`);
    navigate('/sign-in', { replace: true });
  };
  return (
    <Section title="Deactivate the account" danger>
      <p>Deactivating the account cannot be undone. At once:</p>
      <ul className="consequences">
        <li>
          Your personal workspace closes and every organization where you are the only member is deleted: their API keys are revoked and their webhooks
          disabled.
        </li>
        <li>People you invited to your personal workspace lose their membership, and its pending invitations are revoked.</li>
        <li>Your memberships in other organizations end.</li>
        <li>Your API keys are revoked and every session ends, this one included.</li>
        <li>Signing in with this email address and password is refused from then on.</li>
      </ul>
      <p>
        30 days later your email address and name are erased; billing records are kept under your user id, without them. A notice is mailed to you. If you own
        an organization that has other members, transfer its ownership to one of them first.
      </p>
      <Form onSubmit={submit} submitLabel="Deactivate my account" busyLabel="Deactivating…" danger label="Deactivate the account">
        <Field name="password" label="Your password" type="password" autoComplete="current-password" value={password} onChange={setPassword} required />
        {account.two_factor_enabled && <CodeField value={code} onChange={setCode} />}
        <Checkbox
          name="confirm"
          label="I understand that my account, my personal workspace and my API keys go for good."
          checked={confirmed}
          onChange={setConfirmed}
        />
      </Form>
    </Section>
  );
}
