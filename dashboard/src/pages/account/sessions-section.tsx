import { useState } from 'react';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { Link, useRouter } from '../../router';
import { useSignedIn } from '../../session';

/** Ending sessions all at once: the other ones, or every one; the Sessions page lists them and ends one at a time. */
export function SessionsSection() {
  const { client, ended } = useSignedIn();
  const { navigate } = useRouter();
  const [othersEnded, setOthersEnded] = useState(false);
  const signOutOthers = async () => {
    setOthersEnded(false);
    await client.signOut('others');
    setOthersEnded(true);
  };
  const signOutEverywhere = async () => {
    await client.signOut('global');
    ended('You signed out of every session of the account.');
    navigate('/sign-in', { replace: true });
  };
  return (
    <Section title="Sessions">
      <p>
        A session lasts up to 30 days, and ends after 7 days without use. <Link to="/sessions">The Sessions page</Link> lists them and signs out one at a time;
        here you end them all at once:
      </p>
      <div className="button-row">
        <Form onSubmit={signOutOthers} submitLabel="Sign out of other sessions" busyLabel="Signing out…" label="Sign out of other sessions">
          <p className="hint">Every other browser or device signed in as you; this session goes on. API keys keep working.</p>
        </Form>
        <Form onSubmit={signOutEverywhere} submitLabel="Sign out everywhere" busyLabel="Signing out…" label="Sign out everywhere">
          <p className="hint">Every session, this one included.</p>
        </Form>
      </div>
      {othersEnded && <Notice>Every other session is signed out.</Notice>}
    </Section>
  );
}
