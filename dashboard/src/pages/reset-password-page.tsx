import { useState } from 'react';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { Link } from '../router';

import { useSession } from '../session';

/** Asks for a reset token by mail. The API answers the same for every address, so this page does too. */
export function ResetPasswordPage() {
  const { client } = useSession();
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState(false);
  const submit = async () => {
    await client.post('/v1/auth/password-reset', { body: { email } });
    setSent(true);
  };
  return (
    <Page title="Reset your password">
      {sent ? (
        <>
          <Notice>
            If an account uses <strong>{email}</strong>, a reset token is on its way to it. The token is valid for 1 hour and works once.
          </Notice>
          <p>
            <Link to="/reset-password/confirm" className="button primary">
              I have the token
            </Link>
          </p>
        </>
      ) : (
        <Form onSubmit={submit} submitLabel="Mail me a reset token" busyLabel="Sending…" label="Reset your password">
          <Field name="email" label="Email address" type="email" autoComplete="email" value={email} onChange={setEmail} required />
        </Form>
      )}
      <p>
        <Link to="/reset-password/confirm">Set a new password with a token you have</Link> · <Link to="/sign-in">Back to sign-in</Link>
      </p>
    </Page>
  );
}
