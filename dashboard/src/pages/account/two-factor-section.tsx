import { useRef, useState } from 'react';
import { CodeField } from '../../components/code-field';
import { Field } from '../../components/field';
import { Form } from '../../components/form';
import { Loaded } from '../../components/loaded';
import { Notice } from '../../components/notice';
import { QrCode } from '../../components/qr-code';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { useSignedIn } from '../../session';
import { useCopy } from '../../use-copy';
import { useLoad } from '../../use-load';
import { RecoveryCodes } from './recovery-codes';

type Enrollment = { secret: string; otpauth_uri: string };

/**
 * Two-factor authentication: turn it on (password, then the QR code or the secret in an
 * authenticator app, then a first code), see the recovery codes once, replace them, turn it off.
 */
export function TwoFactorSection() {
  const { client } = useSignedIn();
  const status = useLoad(() => client.get('/v1/account/2fa'), [client]);
  const [enrollment, setEnrollment] = useState<Enrollment>();
  const [codes, setCodes] = useState<string[]>();
  const [notice, setNotice] = useState<string>();

  const showCodes = (recoveryCodes: string[], message: string) => {
    setEnrollment(undefined);
    setCodes(recoveryCodes);
    setNotice(message);
    status.reload();
  };

  return (
    <Section title="Two-factor authentication">
      {notice && <Notice>{notice}</Notice>}
      {codes ? (
        <RecoveryCodes codes={codes} onDone={() => setCodes(undefined)} />
      ) : enrollment ? (
        <Activate
          enrollment={enrollment}
          onActivated={(recoveryCodes) => showCodes(recoveryCodes, 'Two-factor authentication is on.')}
          onCancel={() => setEnrollment(undefined)}
        />
      ) : (
        <Loaded state={status} what="Loading the two-factor status">
          {(twoFactor) =>
            twoFactor.enabled ? (
              <Enabled
                since={twoFactor.enabled_at}
                remaining={twoFactor.recovery_codes_remaining}
                onRegenerated={(recoveryCodes) => showCodes(recoveryCodes, 'New recovery codes replace the old ones.')}
                onDisabled={() => {
                  setNotice('Two-factor authentication is off.');
                  status.reload();
                }}
              />
            ) : (
              <Enroll
                onEnrolled={(started) => {
                  setNotice(undefined);
                  setEnrollment(started);
                }}
              />
            )
          }
        </Loaded>
      )}
    </Section>
  );
}

function Enroll({ onEnrolled }: { onEnrolled(enrollment: Enrollment): void }) {
  const { client } = useSignedIn();
  const [password, setPassword] = useState('');
  const submit = async () => onEnrolled(await client.post('/v1/account/2fa/enroll', { body: { password } }));
  return (
    <>
      <p>
        Two-factor authentication is <strong>off</strong>. With it on, signing in also asks for a code of an authenticator app on your phone.
      </p>
      <Form onSubmit={submit} submitLabel="Set up two-factor authentication" busyLabel="Starting…" label="Set up two-factor authentication">
        <Field
          name="password"
          label="Your password"
          type="password"
          autoComplete="current-password"
          hint="Asked again before a sign-in setting changes."
          value={password}
          onChange={setPassword}
          required
        />
      </Form>
    </>
  );
}

/** A pending enrollment changes nothing until activated: cancelling just leaves it (enrolling again replaces it). */
function Activate({ enrollment, onActivated, onCancel }: { enrollment: Enrollment; onActivated(recoveryCodes: string[]): void; onCancel(): void }) {
  const { client, reloadAccount } = useSignedIn();
  const [code, setCode] = useState('');
  const submit = async () => {
    const { recovery_codes } = await client.post('/v1/account/2fa/activate', { body: { code: code.trim() } });
    await reloadAccount();
    onActivated(recovery_codes);
  };
  return (
    <>
      <ol className="steps">
        <li>
          <p>Scan this QR code with an authenticator app (Google Authenticator, 1Password, Aegis, …):</p>
          <QrCode value={enrollment.otpauth_uri} alt="QR code of the two-factor secret, for an authenticator app" />
        </li>
        <li>
          <p>Or type this secret into the app (time-based, 6 digits, every 30 seconds):</p>
          <TotpSecret secret={enrollment.secret} />
        </li>
        <li>
          <p>Then enter the code the app shows. Sign-in does not change until this step succeeds.</p>
        </li>
      </ol>
      <Form
        onSubmit={submit}
        submitLabel="Turn on"
        busyLabel="Checking…"
        label="Activate two-factor authentication"
        actions={
          <button type="button" className="button" onClick={onCancel}>
            Cancel
          </button>
        }
      >
        <CodeField value={code} onChange={setCode} />
      </Form>
    </>
  );
}

/** The secret as text, with a Copy button: pasting it beats typing 32 characters (on a phone, into a desktop app). */
function TotpSecret({ secret }: { secret: string }) {
  const text = useRef<HTMLElement>(null);
  const { copy, status } = useCopy(secret, () => {
    if (text.current) window.getSelection()?.selectAllChildren(text.current);
  });
  return (
    <>
      <p className="copy-row">
        <code ref={text} className="secret-text" data-testid="totp-secret">
          {secret}
        </code>
        <button type="button" className="button" onClick={copy}>
          Copy
        </button>
      </p>
      <p className="copy-status" role="status">
        {status}
      </p>
    </>
  );
}

function Enabled({
  since,
  remaining,
  onRegenerated,
  onDisabled,
}: {
  since: string | null;
  remaining: number;
  onRegenerated(codes: string[]): void;
  onDisabled(): void;
}) {
  const { client, reloadAccount } = useSignedIn();
  const [regenerateCode, setRegenerateCode] = useState('');
  const [disableCode, setDisableCode] = useState('');
  const [disablePassword, setDisablePassword] = useState('');
  const regenerate = async () => {
    const { recovery_codes } = await client.post('/v1/account/2fa/recovery-codes', { body: { code: regenerateCode.trim() } });
    onRegenerated(recovery_codes);
  };
  const disable = async () => {
    const code = disableCode.trim();
    await client.post('/v1/account/2fa/disable', { body: code ? { code } : { password: disablePassword } });
    await reloadAccount();
    onDisabled();
  };
  return (
    <>
      <p>
        Two-factor authentication is <strong>on</strong> since {formatDateTime(since)}. {remaining} unused recovery {remaining === 1 ? 'code is' : 'codes are'}{' '}
        left.
      </p>
      <h3>New recovery codes</h3>
      <p>The old codes stop working at once.</p>
      <Form onSubmit={regenerate} submitLabel="Replace the recovery codes" busyLabel="Replacing…" label="Replace the recovery codes">
        <CodeField value={regenerateCode} onChange={setRegenerateCode} />
      </Form>
      <h3>Turn off</h3>
      <p>Sign-in then asks for the password only; the secret and the recovery codes are deleted. Give a code of the app, or else your password.</p>
      <Form onSubmit={disable} submitLabel="Turn off two-factor authentication" busyLabel="Turning off…" danger label="Turn off two-factor authentication">
        <CodeField value={disableCode} onChange={setDisableCode} required={false} />
        <Field name="password" label="Or your password" type="password" autoComplete="current-password" value={disablePassword} onChange={setDisablePassword} />
      </Form>
    </>
  );
}
