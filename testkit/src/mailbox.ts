import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually } from '@switchboard/runtime/testing';
import { expect } from 'vitest';

/** A mail the mesh wrote to MAILBOX_DIR (one .eml file per message). */
export interface Mail {
  file: string;
  to: string;
  subject: string;
  kind: string;
  /** The text/plain part (decoded; CRLF lines, as written). */
  text: string;
  /** The text/html part (decoded), when the mail has one. */
  html?: string;
  /** Every header of the message, by lower-case name. */
  headers: Record<string, string>;
}

/** The header fields of a header block, by lower-case name (unfolded). */
function parseHeaders(head: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** A body as its Content-Transfer-Encoding says (8bit, or quoted-printable for long lines). */
function decodeBody(body: string, encoding = ''): string {
  if (encoding.toLowerCase() !== 'quoted-printable') return body;
  const bytes = body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  return Buffer.from(bytes, 'latin1').toString('utf8');
}

/** Parses an .eml file: headers, and the text and HTML parts of a multipart/alternative one. */
export function parseMail(file: string, raw: string): Mail {
  const split = raw.indexOf('\r\n\r\n');
  const headers = parseHeaders(raw.slice(0, split));
  const body = raw.slice(split + 4);
  const parts: Record<string, string> = {};
  const boundary = /multipart\/alternative;\s*boundary="([^"]+)"/i.exec(headers['content-type'] ?? '')?.[1];
  if (boundary) {
    for (const chunk of body.split(`--${boundary}`).slice(1, -1)) {
      const part = chunk.replace(/^\r\n/, '').replace(/\r\n$/, '');
      const end = part.indexOf('\r\n\r\n');
      const partHeaders = parseHeaders(part.slice(0, end));
      const type = (partHeaders['content-type'] ?? '').split(';')[0].trim();
      parts[type] = decodeBody(part.slice(end + 4), partHeaders['content-transfer-encoding']);
    }
  } else {
    parts['text/plain'] = decodeBody(body, headers['content-transfer-encoding']);
  }
  return {
    file,
    to: headers.to ?? '',
    subject: headers.subject ?? '',
    kind: headers['x-switchboard-mail-kind'] ?? '',
    text: parts['text/plain'] ?? '',
    html: parts['text/html'],
    headers,
  };
}

/** Reads the .eml files of a mailbox directory; files already parsed are kept, so polling stays cheap. */
export class Mailbox {
  private readonly seen = new Map<string, Mail>();

  constructor(readonly directory: string) {}

  async all(): Promise<Mail[]> {
    const names = (await readdir(this.directory).catch(() => [] as string[])).filter((name) => name.endsWith('.eml')).sort();
    for (const name of names) {
      if (this.seen.has(name)) continue;
      this.seen.set(name, parseMail(name, await readFile(path.join(this.directory, name), 'utf8')));
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

/**
 * The links of a mail: the URLs on lines of their own in the text part, and the `href`s of the
 * HTML part (entities decoded), each once, in order.
 */
export function linksOf(mail: Mail): { text: string[]; html: string[] } {
  const text = mail.text.split(/\r?\n/).filter((line) => /^https?:\/\/\S+$/.test(line.trim()));
  const html = [...(mail.html ?? '').matchAll(/href="([^"]*)"/g)].map((match) =>
    match[1].replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code))).replace(/&amp;/g, '&'),
  );
  return { text: [...new Set(text.map((line) => line.trim()))], html: [...new Set(html)] };
}

/**
 * Checks that every link of `mail` opens a page: the text and the HTML part have the same links,
 * and the gateway answers each with 200 and HTML (the dashboard, for a link without credentials).
 */
export async function expectLinksOpen(mail: Mail): Promise<void> {
  const links = linksOf(mail);
  expect(links.text.length, `links in mail ${mail.file}`).toBeGreaterThan(0);
  expect(links.html).toEqual(links.text);
  for (const link of links.text) {
    const opened = await fetch(link, { signal: AbortSignal.timeout(10_000) });
    expect(opened.status, link).toBe(200);
    expect(opened.headers.get('content-type')).toMatch(/^text\/html/);
    await opened.body?.cancel();
  }
}

/**
 * Checks the link of a token mail and returns its token: one link, the same in the text and the
 * HTML part, to the dashboard page `page` (`/app/verify-email`) on `baseUrl` (PUBLIC_BASE_URL),
 * which opens; the token rides in the fragment and is the mail's token line.
 */
export async function tokenOfLink(mail: Mail, baseUrl: string, page: string): Promise<string> {
  await expectLinksOpen(mail);
  const [link, ...others] = linksOf(mail).text;
  expect(others).toEqual([]);
  const url = new URL(link);
  expect(`${url.origin}${url.pathname}`).toBe(`${baseUrl}${page}`);
  const token = new URLSearchParams(url.hash.slice(1)).get('token');
  expect(token).toBe(tokenOf(mail));
  return token!;
}
