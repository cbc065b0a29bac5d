import { useState } from 'react';
import { CodeField } from '../components/code-field';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { Link } from '../router';
import { useSession } from '../session';

/** Email and password, then, with 2FA on, a code of the authenticator app or a recovery code. */
export function SignInPage() {
  const { notice } = useSession();
  const [challenge, setChallenge] = useState<string>();
  return challenge ? (
    <SecondFactor challenge={challenge} onRestart={() => setChallenge(undefined)} />
  ) : (
    <Page title="Sign in">
      {notice && <Notice>{notice}</Notice>}
      <Password onChallenge={setChallenge} />
      <p>
        New here? <Link to="/sign-up">Create an account</Link>. <Link to="/reset-password">Forgot your password?</Link>
      </p>
    </Page>
  );
}

function Password({ onChallenge }: { onChallenge(mfaToken: string): void }) {
  const { client, start } = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const submit = async () => {
    const answer = await client.signIn({ email, password });
    if (answer.mfa_required && answer.mfa_token) onChallenge(answer.mfa_token);
    else await start();
  };
  return (
    <Form onSubmit={submit} submitLabel="Sign in" busyLabel="Signing in…" label="Sign in">
      <Field name="email" label="Email address" type="email" autoComplete="username" value={email} onChange={setEmail} required />
      <Field name="password" label="Password" type="password" autoComplete="current-password" value={password} onChange={setPassword} required />
    </Form>
  );
}

function SecondFactor({ challenge, onRestart }: { challenge: string; onRestart(): void }) {
  const { client, start } = useSession();
  const [withRecoveryCode, setWithRecoveryCode] = useState(false);
  const [code, setCode] = useState('');
  const [recoveryCode, setRecoveryCode] = useState('');
  const submit = async () => {
    await client.signInSecondFactor(withRecoveryCode ? { mfa_token: challenge, recovery_code: recoveryCode } : { mfa_token: challenge, code: code.trim() });
    await start();
  };
  const restart = (
    <button type="button" className="button link" onClick={onRestart}>
      Start over
    </button>
  );
  return (
    <Page title="Two-factor authentication">
      <Form onSubmit={submit} submitLabel="Continue" busyLabel="Checking…" label="Second factor" actions={restart}>
        {withRecoveryCode ? (
          <Field
            name="recovery_code"
            label="Recovery code"
            hint="One of the codes you saved when you turned two-factor authentication on; each works once."
            autoComplete="off"
            spellCheck={false}
            value={recoveryCode}
            onChange={setRecoveryCode}
            required
          />
        ) : (
          <CodeField value={code} onChange={setCode} />
        )}
      </Form>
      <p>
        <button type="button" className="button link" onClick={() => setWithRecoveryCode(!withRecoveryCode)}>
          {withRecoveryCode ? 'Use a code of the authenticator app instead' : 'Use a recovery code instead'}
        </button>
      </p>
    </Page>
  );
}
