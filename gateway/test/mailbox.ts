import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

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
  async waitFor(predicate: (mail: Mail) => boolean, what: string, timeoutMs = 10_000): Promise<Mail> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = (await this.all()).filter(predicate).pop();
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no mail for ${what} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
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
