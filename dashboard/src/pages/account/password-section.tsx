import { useState } from 'react';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { useSignedIn } from '../../session';

export function PasswordSection() {
  const { client } = useSignedIn();
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [changed, setChanged] = useState(false);
  const submit = async () => {
    setChanged(false);
    await client.post('/v1/account/password', { body: { current_password: current, new_password: next } });
    setCurrent('');
    setNext('');
    setChanged(true);
  };
  return (
    <Section title="Password">
      <p>Changing the password signs out every other session of the account; this one goes on. A notice is mailed to you.</p>
      <Form onSubmit={submit} submitLabel="Change password" busyLabel="Changing…" label="Change password">
        <Field
          name="current_password"
          label="Current password"
          type="password"
          autoComplete="current-password"
          value={current}
          onChange={setCurrent}
          required
        />
        <Field
          name="new_password"
          label="New password"
          type="password"
          autoComplete="new-password"
          hint="8 to 128 characters; not your email address and not a common password."
          value={next}
          onChange={setNext}
          required
        />
      </Form>
      {changed && <Notice>Your password is changed, and your other sessions are signed out.</Notice>}
    </Section>
  );
}
