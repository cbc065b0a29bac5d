import { useState } from 'react';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Page } from '../components/page';
import { useMailedToken } from '../mailed-token';
import { Link, useRouter } from '../router';
import { useSession } from '../session';

/**
 * Sets a new password with the mailed reset token (the mail's link fills it in); every session
 * of the account ends, this one too.
 */
export function ResetPasswordConfirmPage() {
  const { client, ended } = useSession();
  const { navigate } = useRouter();
  const mailed = useMailedToken();
  const [token, setToken] = useState(mailed);
  const [password, setPassword] = useState('');
  const submit = async () => {
    await client.post('/v1/auth/password-reset/confirm', { body: { token: token.trim(), new_password: password } });
    ended('Your password is changed and every session of the account has ended. Sign in with the new password.');
    navigate('/sign-in', { replace: true });
  };
  return (
    <Page title="Set a new password">
      <Form onSubmit={submit} submitLabel="Set the new password" busyLabel="Saving…" label="Set a new password">
        <Field
          name="token"
          label="Token from the reset mail"
          hint={mailed ? 'Filled in from the link of your mail.' : undefined}
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={setToken}
          required
        />
        <Field
          name="new_password"
          label="New password"
          type="password"
          autoComplete="new-password"
          hint="8 to 128 characters; not your email address and not a common password. Two-factor authentication stays on if it was."
          value={password}
          onChange={setPassword}
          required
        />
      </Form>
      <p>
        <Link to="/reset-password">Ask for a new token</Link>
      </p>
    </Page>
  );
}
