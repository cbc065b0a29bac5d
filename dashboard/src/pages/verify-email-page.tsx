import { useState } from 'react';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { Link, useRouter } from '../router';
import { useSession } from '../session';

/** Confirms the email address with the token of the mail sent at registration (no sign-in needed: the token is the proof). */
export function VerifyEmailPage() {
  const { client, status, account, reloadAccount } = useSession();
  const { location } = useRouter();
  const [token, setToken] = useState('');
  const [verified, setVerified] = useState(false);
  const signedIn = status === 'signed-in';
  const submit = async () => {
    await client.post('/v1/auth/verify-email', { body: { token: token.trim() } });
    setVerified(true);
    if (signedIn) await reloadAccount();
  };
  if (verified) {
    return (
      <Page title="Email address confirmed">
        <Notice>Your email address is confirmed.</Notice>
        <p>{signedIn ? <Link to="/account">Go to your account</Link> : <Link to="/sign-in">Sign in</Link>}</p>
      </Page>
    );
  }
  return (
    <Page title="Confirm your email address">
      {/* Only while it is true: signing out on this page must not leave it saying so. */}
      {location.query.has('registered') && signedIn && <Notice>Your account is created and you are signed in.</Notice>}
      <p>
        We mailed a confirmation token to {account ? <strong>{account.email}</strong> : 'your address'} when the account was created. It is valid for 24 hours
        and works once. Paste it here.
      </p>
      <Form onSubmit={submit} submitLabel="Confirm address" busyLabel="Confirming…" label="Confirm your email address">
        <Field name="token" label="Token from the mail" autoComplete="off" spellCheck={false} value={token} onChange={setToken} required />
      </Form>
      {signedIn && (
        <p>
          <Link to="/account">Later: go to your account</Link>
        </p>
      )}
    </Page>
  );
}
