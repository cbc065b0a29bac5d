import { Loading } from '../components/loading';
import { Page } from '../components/page';
import { forgetMailedToken, useMailedToken } from '../mailed-token';
import { Link } from '../router';
import { useSession } from '../session';
import { JoinSection } from './organization/join-section';

/** Where the invitation's token waits in this tab while its visitor signs in. */
const keptAs = 'switchboard.invitation-token';

/**
 * The page of an invitation mail's link: signed in, the invitation's token is filled in and one
 * click joins. Signed out, the page asks to sign in (or sign up) with the invited address first;
 * the token waits in this tab meanwhile, so signing in comes back here with it.
 */
export function AcceptInvitationPage() {
  const { status } = useSession();
  const mailed = useMailedToken(keptAs);
  if (status === 'restoring' || status === 'starting') return <Loading what="Signing in" />;
  if (status === 'signed-in') {
    return (
      <Page title="Accept an invitation">
        <JoinSection mailed={mailed} onJoined={() => forgetMailedToken(keptAs)} />
      </Page>
    );
  }
  return (
    <Page title="Accept an invitation">
      <p>An invitation works for the address it was mailed to: sign in with it, or create an account with it first.</p>
      <p>
        <Link to="/sign-in?next=/invitations/accept" className="button primary">
          Sign in to join
        </Link>{' '}
        <Link to="/sign-up">Create an account</Link>
      </p>
      {mailed && <p>After creating the account, open the link of the invitation mail again.</p>}
    </Page>
  );
}
