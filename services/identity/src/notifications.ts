import type { Logger } from '@switchboard/runtime/log';
import { composeMail, type MailBlock, type Mailer } from '@switchboard/runtime/mail';

/**
 * Every mail identity sends (docs/api/identity.md#mail): the verification, reset and invitation
 * mails, whose token also rides in a link to the dashboard page that takes it, a notice on every
 * credential change, so an owner learns at once of a change they did not make, and the data
 * export's link. Each has a text and an HTML part (composeMail). The bodies never carry a secret
 * but the token of a token mail; the log line never does.
 */

export type CredentialChange =
  | 'password_changed'
  | 'password_reset'
  | 'two_factor_enabled'
  | 'two_factor_disabled'
  | 'recovery_codes_regenerated'
  | 'account_deactivated';

const notices: Record<CredentialChange, { subject: string; line: string }> = {
  password_changed: {
    subject: 'Your password was changed',
    line: 'The password of your Switchboard account was changed. Your other sessions were signed out.',
  },
  password_reset: {
    subject: 'Your password was reset',
    line: 'The password of your Switchboard account was reset with a mailed link. Every session was signed out.',
  },
  two_factor_enabled: { subject: 'Two-factor authentication is on', line: 'Two-factor authentication was turned on for your Switchboard account.' },
  two_factor_disabled: { subject: 'Two-factor authentication is off', line: 'Two-factor authentication was turned off for your Switchboard account.' },
  recovery_codes_regenerated: {
    subject: 'New recovery codes',
    line: 'New two-factor recovery codes were generated for your Switchboard account; the previous ones no longer work.',
  },
  account_deactivated: {
    subject: 'Your account was deactivated',
    line: 'Your Switchboard account was deactivated and every session was signed out. Its personal data will be erased after the grace period.',
  },
};

export interface MailRecipient {
  id: string;
  email: string;
  fullName: string | null;
}

/** The dashboard pages (under /app) that take a mailed token. */
export type TokenPage = '/verify-email' | '/reset-password/confirm' | '/invitations/accept';

/**
 * The link of a mailed token: its dashboard page with the token in the fragment. A fragment never
 * leaves the browser (no request line, access log or Referer carries it) and the page only fills
 * its form from it, so a mail scanner that opens the link redeems nothing
 * (docs/api/identity.md#mail).
 */
export function tokenLink(publicUrl: string, page: TokenPage, token: string): string {
  return `${publicUrl}/app${page}#token=${encodeURIComponent(token)}`;
}

const greeting = (user: { fullName: string | null }) => (user.fullName ? `Hello ${user.fullName},` : 'Hello,');

export class AccountMail {
  constructor(private readonly deps: { mailer: Mailer; log: Logger; publicUrl: string }) {}

  /** A credential-change notice; a mail failure is logged and never undoes the change. */
  async credentialChanged(user: MailRecipient, change: CredentialChange): Promise<void> {
    const notice = notices[change];
    await this.send(user, notice.subject, change, [
      greeting(user),
      [notice.line, `Time: ${new Date().toISOString()}`],
      'If this was not you, reset your password at once and contact support:',
      { link: `${this.deps.publicUrl}/app/reset-password`, label: 'Reset your password' },
    ]);
  }

  /** The verification token of the account's address (at registration, and on a resend). */
  async emailVerification(user: MailRecipient, token: string): Promise<void> {
    await this.send(user, 'Confirm your email address', 'email_verification', [
      greeting(user),
      `please confirm that ${user.email} is your email address for Switchboard. Open this link (valid for 24 hours, it works once):`,
      { link: tokenLink(this.deps.publicUrl, '/verify-email', token), label: 'Confirm your email address' },
      'Or use your verification token:',
      { token },
      'Send it to POST /v1/auth/verify-email as {"token": "..."}, or paste it where the app asks for it.',
      'If you did not create a Switchboard account, ignore this message.',
    ]);
  }

  async passwordReset(user: MailRecipient, token: string, lifetimeMinutes: number): Promise<void> {
    await this.send(user, 'Reset your password', 'password_reset_request', [
      greeting(user),
      `someone asked to reset the password of your Switchboard account. Open this link to choose a new password (single use, valid for ${lifetimeMinutes} minutes):`,
      { link: tokenLink(this.deps.publicUrl, '/reset-password/confirm', token), label: 'Choose a new password' },
      'Or use your reset token:',
      { token },
      'Send it to POST /v1/auth/password-reset/confirm as {"token": "...", "new_password": "..."}.',
      'If you did not ask for this, ignore this message: your password stays as it is.',
    ]);
  }

  /** An invitation to an organization, to an address that may have no account yet. */
  async invitation(
    invitation: { id: string; email: string; role: string; expiresAt: Date },
    token: string,
    organizationName: string,
    inviter: string,
  ): Promise<void> {
    const to = { id: invitation.id, email: invitation.email, fullName: null };
    await this.send(to, `Invitation to join ${organizationName} on Switchboard`, 'invitation', [
      'Hello,',
      `${inviter} invited ${invitation.email} to join the organization "${organizationName}" on Switchboard as ${invitation.role}.`,
      `Sign in (or create an account) with this email address, then open this link to join (valid until ${invitation.expiresAt.toISOString()}):`,
      { link: tokenLink(this.deps.publicUrl, '/invitations/accept', token), label: `Join ${organizationName}` },
      'Or use your invitation token:',
      { token },
      ['Paste it under "Join an organization" on the Organization page of the dashboard, or send it to', 'POST /v1/invitations/accept as {"token": "..."}.'],
      'If you did not expect this invitation, ignore this message.',
    ]);
  }

  /**
   * The export is ready (docs/api/identity.md#data-export), never its content: a link to the
   * dashboard page that downloads it with the reader's session, and the URL of
   * `GET /v1/account/exports/{id}` the contract names, for a program with a user session's token
   * (a link cannot carry the bearer token that route needs, so it is text, not a button).
   */
  async dataExportReady(user: MailRecipient, exportId: string, expiresAt: Date): Promise<void> {
    await this.send(user, 'Your data export is ready', 'data_export_ready', [
      greeting(user),
      'the copy of your Switchboard data you asked for is ready. Download it, signed in as yourself, at:',
      { link: `${this.deps.publicUrl}/app/account/exports/${encodeURIComponent(exportId)}`, label: 'Download your data' },
      `A program downloads it with GET ${this.deps.publicUrl}/v1/account/exports/${encodeURIComponent(exportId)} and a user session's bearer token.`,
      `The link works until ${expiresAt.toISOString()} (7 days); then the copy is deleted and you can ask for a new one.`,
      'If you did not ask for this, change your password and contact support.',
    ]);
  }

  /** Sends; a failure is logged (with the recipient's id, never the body) and never undoes what the mail tells of. */
  private async send(to: MailRecipient, subject: string, kind: string, blocks: MailBlock[]): Promise<void> {
    try {
      await this.deps.mailer.send({ to: to.email, subject, kind, ...composeMail(subject, blocks) });
    } catch (err) {
      this.deps.log.error({ recipient_id: to.id, mail_kind: kind, err: (err as Error).message }, 'could not send a mail');
    }
  }
}
