import { DownloadLink } from '../../components/download-link';

/** The recovery codes of this answer: shown this once (the API keeps only their hashes), with a download. */
export function RecoveryCodes({ codes, onDone }: { codes: string[]; onDone(): void }) {
  const file = `Switchboard recovery codes (${new Date().toISOString().slice(0, 10)})\nEach code signs in once in place of an authenticator code.\n\n${codes.join('\n')}\n`;
  return (
    <div className="recovery-codes">
      <p className="warning">
        <strong>Shown only once.</strong> Save these recovery codes somewhere safe (a password manager, or on paper). Each one signs you in once if you lose the
        authenticator app; they cannot be shown again.
      </p>
      <ul className="codes" aria-label="Recovery codes">
        {codes.map((code) => (
          <li key={code}>
            <code>{code}</code>
          </li>
        ))}
      </ul>
      <div className="button-row">
        <DownloadLink filename="switchboard-recovery-codes.txt" text={file}>
          Download the codes
        </DownloadLink>
        <button type="button" className="button primary" onClick={onDone}>
          I have saved them
        </button>
      </div>
    </div>
  );
}
