import type { Logger } from '@switchboard/runtime/log';
import type { Mailer } from '@switchboard/runtime/mail';

/**
 * Mails about the account itself: the password reset link and a notice on every credential
 * change (docs/api/identity.md#mail), so an owner learns at once of a change they did not make. The bodies never
 * carry a secret except the reset token of the reset mail; the log line never does.
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

export class AccountMail {
  constructor(private readonly deps: { mailer: Mailer; log: Logger }) {}

  /** A credential-change notice; a mail failure is logged and never undoes the change. */
  async credentialChanged(user: MailRecipient, change: CredentialChange): Promise<void> {
    const notice = notices[change];
    const text = [
      user.fullName ? `Hello ${user.fullName},` : 'Hello,',
      '',
      notice.line,
      `Time: ${new Date().toISOString()}`,
      '',
      'If this was not you, reset your password at once and contact support.',
    ].join('\n');
    await this.send(user, { subject: notice.subject, text, kind: change });
  }

  async passwordReset(user: MailRecipient, token: string, lifetimeMinutes: number): Promise<void> {
    const text = [
      user.fullName ? `Hello ${user.fullName},` : 'Hello,',
      '',
      'someone asked to reset the password of your Switchboard account.',
      `Your reset token (single use, valid for ${lifetimeMinutes} minutes):`,
      '',
      token,
      '',
      'Send it to POST /v1/auth/password-reset/confirm as {"token": "...", "new_password": "..."}.',
      '',
      'If you did not ask for this, ignore this message: your password stays as it is.',
    ].join('\n');
    await this.send(user, { subject: 'Reset your password', text, kind: 'password_reset_request' });
  }

  /** The data export is ready (docs/api/identity.md#data-export): its link, never its content. */
  async dataExportReady(user: MailRecipient, link: string, expiresAt: Date): Promise<void> {
    const text = [
      user.fullName ? `Hello ${user.fullName},` : 'Hello,',
      '',
      'the copy of your Switchboard data you asked for is ready. Download it, signed in as yourself, at:',
      '',
      link,
      '',
      `The link works until ${expiresAt.toISOString()} (7 days); then the copy is deleted and you can ask for a new one.`,
      '',
      'If you did not ask for this, change your password and contact support.',
    ].join('\n');
    await this.send(user, { subject: 'Your data export is ready', text, kind: 'data_export_ready' });
  }

  private async send(user: MailRecipient, message: { subject: string; text: string; kind: string }): Promise<void> {
    try {
      await this.deps.mailer.send({ to: user.email, ...message });
    } catch (err) {
      this.deps.log.error({ user_id: user.id, mail_kind: message.kind, err: (err as Error).message }, 'could not send an account mail');
    }
  }
}
