import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@switchboard/runtime/testing';

/** A mail the mesh wrote to MAILBOX_DIR (one .eml file per message). */
export interface Mail {
  file: string;
  to: string;
  subject: string;
  kind: string;
  text: string;
}

/** Reads the .eml files of a mailbox directory; files already parsed are kept, so polling stays cheap. */
export class Mailbox {
  private readonly seen = new Map<string, Mail>();

  constructor(readonly directory: string) {}

  async all(): Promise<Mail[]> {
    const names = (await readdir(this.directory).catch(() => [] as string[])).filter((name) => name.endsWith('.eml')).sort();
    for (const name of names) {
      if (this.seen.has(name)) continue;
      const raw = await readFile(path.join(this.directory, name), 'utf8');
      const [head, ...body] = raw.split('\r\n\r\n');
      const header = (field: string) => new RegExp(`^${field}: (.*)$`, 'mi').exec(head)?.[1]?.trim() ?? '';
      this.seen.set(name, { file: name, to: header('To'), subject: header('Subject'), kind: header('X-Switchboard-Mail-Kind'), text: body.join('\r\n\r\n') });
    }
    return names.map((name) => this.seen.get(name)!);
  }

  /** The newest mail matching `predicate`, polling until `timeoutMs` (mail is written after commit). */
  waitFor(predicate: (mail: Mail) => boolean, what: string, timeoutMs = 10_000): Promise<Mail> {
    return eventually(async () => (await this.all()).filter(predicate).pop(), `a mail for ${what}`, timeoutMs);
  }

  /** The token of the newest invitation mail to `email` for the organization named `organizationName`. */
  async invitationToken(email: string, organizationName: string): Promise<string> {
    const mail = await this.waitFor(
      (m) => m.kind === 'invitation' && m.to === email && m.text.includes(`"${organizationName}"`),
      `the invitation of ${email} to ${organizationName}`,
    );
    const token = /invitation token:\r\n\r\n(\S+)\r\n/.exec(mail.text)?.[1];
    if (!token) throw new Error(`no token in the invitation mail ${mail.file}`);
    return token;
  }
}

/** The mails of the mailbox directory addressed to `to`, oldest first. */
export async function mailsTo(dir: string, to: string): Promise<Mail[]> {
  return (await new Mailbox(dir).all()).filter((mail) => mail.to === to);
}

/** Waits for the `count`-th mail of `kind` to `to` and returns it. */
export function waitForMail(dir: string, to: string, kind: string, count = 1): Promise<Mail> {
  const mailbox = new Mailbox(dir);
  return eventually(async () => (await mailbox.all()).filter((mail) => mail.to === to && mail.kind === kind)[count - 1], `mail ${kind} #${count} to ${to}`);
}

/** The token line of a mail (43 base64url characters). */
export function tokenOf(mail: Mail): string {
  const line = mail.text.split(/\r?\n/).find((candidate) => /^[A-Za-z0-9_-]{43}$/.test(candidate.trim()));
  if (!line) throw new Error(`no token in mail ${mail.file}`);
  return line.trim();
}
