import { useState } from 'react';
import { Field } from '../components/field';
import { Form } from '../components/form';
import { Page } from '../components/page';
import { Link, useRouter } from '../router';
import { useSession } from '../session';

/** Registration: the account signs in at once; the next page confirms the address with the mailed token. */
export function SignUpPage() {
  const { client, start } = useSession();
  const { navigate } = useRouter();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [fullName, setFullName] = useState('');
  const submit = async () => {
    // An empty name is an error for the API ("leave it out instead"): a blank field leaves it out.
    await client.register({ email, password, ...(fullName.trim() ? { full_name: fullName } : {}) });
    navigate('/verify-email?registered=1', { replace: true });
    await start();
  };
  return (
    <Page title="Create an account">
      <Form onSubmit={submit} submitLabel="Create account" busyLabel="Creating the account…" label="Create an account">
        <Field name="email" label="Email address" type="email" autoComplete="email" value={email} onChange={setEmail} required />
        <Field
          name="password"
          label="Password"
          type="password"
          autoComplete="new-password"
          hint="8 to 128 characters; not your email address and not a common password. A few words make a good one."
          value={password}
          onChange={setPassword}
          required
        />
        <Field
          name="full_name"
          label="Full name"
          autoComplete="name"
          hint="Shown to the members of your organizations."
          value={fullName}
          onChange={setFullName}
        />
      </Form>
      <p>
        Have an account already? <Link to="/sign-in">Sign in</Link>.
      </p>
    </Page>
  );
}
