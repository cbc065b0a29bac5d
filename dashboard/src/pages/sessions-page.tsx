import type { Schemas } from '@switchboard/sdk';
import { useState } from 'react';
import { ConfirmAction } from '../components/confirm-action';
import { LoadMore } from '../components/load-more';
import { Loaded } from '../components/loaded';
import { Notice } from '../components/notice';
import { Page } from '../components/page';
import { Section } from '../components/section';
import { TableHead } from '../components/table-head';
import { formatDateTime } from '../format';
import { useRouter } from '../router';
import { useSignedIn } from '../session';
import { usePages } from '../use-pages';

type AccountSession = Schemas['switchboard.identity.v1.AccountSession'];

const browsers: Array<[RegExp, string]> = [
  [/Edg\/(\d+)/, 'Edge'],
  [/Firefox\/(\d+)/, 'Firefox'],
  [/Chrom(?:e|ium)\/(\d+)/, 'Chrome'],
  [/Version\/(\d+)[^ ]* Safari\//, 'Safari'],
];
const systems: Array<[RegExp, string]> = [
  [/Android/, 'Android'],
  [/iPhone|iPad/, 'iOS'],
  [/Windows/, 'Windows'],
  [/Mac OS X|Macintosh/, 'macOS'],
  [/Linux/, 'Linux'],
];

/** A person's name for a User-Agent ("Chrome 131 on Linux"), or the raw string when it names no known browser. */
function describeClient(userAgent: string | null | undefined): string {
  if (!userAgent) return 'Unknown client';
  const browser = browsers.find(([pattern]) => pattern.test(userAgent));
  if (!browser) return userAgent;
  const version = browser[0].exec(userAgent)?.[1];
  const system = systems.find(([pattern]) => pattern.test(userAgent))?.[1];
  return `${browser[1]} ${version}${system ? ` on ${system}` : ''}`;
}

/**
 * The signed-in sessions of the account (each sign-in on a browser or device), the newest first,
 * with where they were opened; any one can be signed out, this one included.
 */
export function SessionsPage() {
  const { client, ended } = useSignedIn();
  const { navigate } = useRouter();
  const [notice, setNotice] = useState<string>();
  const sessions = usePages((after) => client.get('/v1/account/sessions', { params: { query: { limit: 20, after } } }), [client]);
  const signOut = async (session: AccountSession) => {
    await client.delete('/v1/account/sessions/{session_id}', { params: { path: { session_id: session.session_id } } });
    if (session.current) {
      ended('You signed out.');
      navigate('/sign-in', { replace: true });
      return;
    }
    setNotice(`The session of ${describeClient(session.user_agent)} is signed out: it can no longer use the account.`);
    sessions.reload();
  };
  return (
    <Page title="Sessions">
      <p>
        Each sign-in on a browser or device is a session. A session lasts up to 30 days and ends after 7 days without use. Signing one out ends it at once; API
        keys keep working.
      </p>
      {notice && <Notice>{notice}</Notice>}
      <Section title="Signed-in sessions">
        <Loaded state={sessions} what="Loading the sessions">
          {(list) => (
            <table className="data-table">
              <TableHead columns={['Client', 'Address', 'Signed in', 'Last active', 'Ends at the latest']} actions="Actions" />
              <tbody>
                {list.map((session) => (
                  <tr key={session.session_id}>
                    <th scope="row">
                      {describeClient(session.user_agent)} {session.current && <span className="badge ok">This session</span>}
                    </th>
                    <td>{session.ip ?? 'Unknown'}</td>
                    <td>{formatDateTime(session.created_at)}</td>
                    <td>{formatDateTime(session.last_used_at)}</td>
                    <td>{formatDateTime(session.expires_at)}</td>
                    <td className="actions">
                      <ConfirmAction
                        label="Sign out this one"
                        target={session.current ? '(this session)' : `(${describeClient(session.user_agent)}, signed in ${formatDateTime(session.created_at)})`}
                        question={
                          session.current
                            ? 'Sign out this session? You will need to sign in again here.'
                            : `Sign out the session of ${describeClient(session.user_agent)}? It stops working at once.`
                        }
                        confirmLabel="Sign out the session"
                        onConfirm={() => signOut(session)}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Loaded>
        <LoadMore pages={sessions} what="sessions" />
      </Section>
    </Page>
  );
}
