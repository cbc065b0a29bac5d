import { useState } from 'react';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { useMailedToken } from '../mailed-token';
import { Link, useRouter } from '../router';
import { useSession } from '../session';

/**
 * Confirms the email address with the token of the mail sent at registration (no sign-in needed:
 * the token is the proof); the mail's link fills it in. A new mail can be asked for here.
 */
export function VerifyEmailPage() {
  const { client, status, account, reloadAccount } = useSession();
  const { location } = useRouter();
  const mailed = useMailedToken();
  const [token, setToken] = useState(mailed);
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
        {mailed ? (
          'The link of your mail filled in its token. Confirm to finish.'
        ) : (
          <>
            We mailed a link and a confirmation token to {account ? <strong>{account.email}</strong> : 'your address'} when the account was created. Open the
            link, or paste the token here. It is valid for 24 hours and works once.
          </>
        )}
      </p>
      <Form onSubmit={submit} submitLabel="Confirm address" busyLabel="Confirming…" label="Confirm your email address">
        <Field name="token" label="Token from the mail" autoComplete="off" spellCheck={false} value={token} onChange={setToken} required />
      </Form>
      {!account?.email_verified && <ResendSection email={account?.email} />}
      {signedIn && (
        <p>
          <Link to="/account">Later: go to your account</Link>
        </p>
      )}
    </Page>
  );
}

/**
 * Asks for a new verification mail: for the signed-in account's address, else for the one typed
 * in. The API answers the same for every address (a mail goes only to an account waiting for
 * its confirmation), so this section does too.
 */
function ResendSection({ email }: { email?: string }) {
  const { client } = useSession();
  const [typed, setTyped] = useState('');
  const [sentTo, setSentTo] = useState<string>();
  const submit = async () => {
    const address = email ?? typed;
    await client.post('/v1/auth/verify-email/resend', { body: { email: address } });
    setSentTo(address);
  };
  return (
    <Section title="No mail?">
      {sentTo ? (
        <Notice>
          If <strong>{sentTo}</strong> belongs to an account waiting for its confirmation, a new link is on its way to it. At most 3 mails go to an address in
          15 minutes.
        </Notice>
      ) : (
        <Form onSubmit={submit} submitLabel="Mail me a new link" busyLabel="Sending…" label="Mail a new confirmation link">
          {email ? (
            <p>
              A new mail goes to <strong>{email}</strong>. Links mailed earlier keep working until they expire.
            </p>
          ) : (
            <Field name="email" label="Email address" type="email" autoComplete="email" value={typed} onChange={setTyped} required />
          )}
        </Form>
      )}
    </Section>
  );
}
