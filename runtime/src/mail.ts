import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import { ConfigError, readString } from './config.js';
import type { Logger } from './log.js';

/**
 * The mail adapter of docs/api/identity.md#mail: verification, reset, invitation and credential-change mails go
 * through a `Mailer`. Without SMTP, each message becomes one RFC 822 `.eml` file in MAILBOX_DIR
 * (development and tests read them there). SMTP delivery is another `Mailer` behind the same
 * interface, chosen by `createMailer` from the environment. A message has a plain-text body and,
 * when composed with `composeMail`, an HTML alternative of the same content.
 */

export interface MailMessage {
  to: string;
  subject: string;
  /** Plain-text body (UTF-8). It may contain a token: it is never logged. */
  text: string;
  /** The same content as HTML (multipart/alternative with `text`); build it with composeMail, which escapes. */
  html?: string;
  /** What the mail is for, e.g. "email_verification"; logged and sent as X-Switchboard-Mail-Kind. */
  kind: string;
}

/**
 * A block of a composed mail: a paragraph (its lines kept), a link (a button in HTML; the bare
 * URL on its own line in text, so any mail client makes it clickable), or a token (on a line of
 * its own in text, where API users and scripts read it: docs/api/identity.md#mail).
 */
export type MailBlock = string | string[] | { link: string; label: string } | { token: string };

/**
 * The text and HTML bodies of `blocks` (`title`: the HTML document's, the mail's subject). The
 * HTML is a plain layout of the same blocks: every value escaped, no remote image, stylesheet or
 * script (mail clients block them, and a remote image would tell a third party the mail was
 * opened), inline styles only.
 */
export function composeMail(title: string, blocks: MailBlock[]): { text: string; html: string } {
  const text = blocks.map((block) => {
    if (typeof block === 'string') return block;
    if (Array.isArray(block)) return block.join('\n');
    return 'link' in block ? block.link : block.token;
  });
  const html = blocks.map((block) => {
    if (typeof block === 'string') return `<p>${escapeHtml(block)}</p>`;
    if (Array.isArray(block)) return `<p>${block.map(escapeHtml).join('<br>\n')}</p>`;
    if ('token' in block) return `<p><code style="font-size:15px;word-break:break-all">${escapeHtml(block.token)}</code></p>`;
    const href = escapeHtml(block.link);
    return [
      `<p><a href="${href}" style="display:inline-block;padding:10px 16px;background:#1f4fd1;color:#ffffff;text-decoration:none;border-radius:4px">${escapeHtml(block.label)}</a></p>`,
      `<p style="font-size:13px;color:#555555">Or open this address: <a href="${href}" style="word-break:break-all">${href}</a></p>`,
    ].join('\n');
  });
  return {
    text: text.join('\n\n'),
    html: [
      '<!DOCTYPE html>',
      '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">',
      `<title>${escapeHtml(title)}</title></head>`,
      '<body style="margin:0;padding:24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;line-height:1.5;color:#1a1a1a;background:#ffffff">',
      '<div style="max-width:560px">',
      ...html,
      '</div>',
      '</body></html>',
    ].join('\n'),
  };
}

/** Text as HTML content or attribute value: the five characters that can change markup, escaped. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

export interface SentMail {
  /** The Message-ID header, without angle brackets. */
  messageId: string;
  /** Where the message went (the file path for the mailbox). */
  location: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<SentMail>;
}

type Env = Record<string, string | undefined>;

export interface MailerOptions {
  log: Logger;
  env?: Env;
}

export const defaultMailboxDir = '.data/mailbox';
const defaultFrom = 'Switchboard <no-reply@switchboard.local>';

/**
 * The mailer the environment asks for: SMTP when SMTP_URL is set (`smtp://user:pass@host:587`
 * with STARTTLS when offered, `smtps://…:465` for TLS from the start; nodemailer's URL options
 * apply), otherwise `.eml` files in MAILBOX_DIR (default `.data/mailbox`, created here). MAIL_FROM
 * is the sender of both.
 */
export function createMailer(options: MailerOptions): Mailer {
  const env = options.env ?? process.env;
  const from = readString('MAIL_FROM', defaultFrom, env);
  if (env.SMTP_URL) {
    let url: URL;
    try {
      url = new URL(env.SMTP_URL);
    } catch {
      throw new ConfigError('SMTP_URL is not a URL (use smtp://user:password@host:587 or smtps://…)');
    }
    if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw new ConfigError('SMTP_URL must start with smtp:// or smtps://');
    const production = env.NODE_ENV === 'production';
    // Mails carry tokens: smtp:// must upgrade with STARTTLS or fail, never fall back to plain
    // text. Outside production a local mail catcher may be reached in the clear, but only when
    // the URL says so (?ignoreTLS=true).
    if (production && url.searchParams.get('ignoreTLS') === 'true') throw new ConfigError('SMTP_URL: ignoreTLS is refused in production (mails carry tokens)');
    if (url.protocol === 'smtp:' && url.searchParams.get('ignoreTLS') !== 'true') url.searchParams.set('requireTLS', 'true');
    return new SmtpMailer({ url: url.toString(), from, log: options.log });
  }
  // Tokens in files on a pod's disk are readable by whoever gets the pod: production sends mail.
  if (env.NODE_ENV === 'production') throw new ConfigError('SMTP_URL is required when NODE_ENV=production (mail carries sign-in and reset tokens)');
  const directory = path.resolve(readString('MAILBOX_DIR', defaultMailboxDir, env));
  // Created at start-up, so a directory that cannot be written fails the start, not a sign-up.
  mkdirSync(directory, { recursive: true });
  return new MailboxMailer({ directory, from, log: options.log });
}

/** Sends each message over SMTP with nodemailer (pooled connections, 10 s timeouts). */
export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(private readonly options: { url: string; from: string; log: Logger }) {
    const url = new URL(options.url);
    url.searchParams.set('pool', 'true');
    for (const [name, value] of [
      ['connectionTimeout', '10000'],
      ['greetingTimeout', '10000'],
      ['socketTimeout', '10000'],
    ]) {
      if (!url.searchParams.has(name)) url.searchParams.set(name, value);
    }
    this.transport = nodemailer.createTransport(url.toString());
  }

  async send(message: MailMessage): Promise<SentMail> {
    const messageId = `${randomBytes(16).toString('hex')}@switchboard.local`;
    const info = (await this.transport.sendMail({
      from: this.options.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
      ...(message.html === undefined ? {} : { html: message.html }),
      messageId: `<${messageId}>`,
      headers: { 'X-Switchboard-Mail-Kind': message.kind },
    })) as { response?: string };
    const host = new URL(this.options.url).host;
    this.options.log.info({ mail_kind: message.kind, to: maskAddress(message.to), message_id: messageId, smtp: host }, 'mail sent over SMTP');
    return { messageId, location: `smtp://${host} (${(info.response ?? '').slice(0, 60)})` };
  }

  close(): void {
    this.transport.close();
  }
}

let sequence = 0;

/** A file name that sorts by creation time: `20250102T030405.678Z-000001-<random>.eml`. */
export function mailFileName(now: Date = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '');
  sequence = (sequence + 1) % 1_000_000;
  return `${stamp}-${String(sequence).padStart(6, '0')}-${randomBytes(4).toString('hex')}.eml`;
}

/** Writes each message as an RFC 822 file; the file appears whole (written aside, then renamed). */
export class MailboxMailer implements Mailer {
  private ready: Promise<unknown> | undefined;

  constructor(private readonly options: { directory: string; from: string; log: Logger }) {}

  get directory(): string {
    return this.options.directory;
  }

  async send(message: MailMessage): Promise<SentMail> {
    this.ready ??= mkdir(this.options.directory, { recursive: true }).catch((err) => {
      this.ready = undefined;
      throw err;
    });
    await this.ready;
    const now = new Date();
    const messageId = `${randomBytes(16).toString('hex')}@switchboard.local`;
    const name = mailFileName(now);
    const target = path.join(this.options.directory, name);
    const temporary = path.join(this.options.directory, `.${name}.tmp`);
    await writeFile(temporary, renderMessage(message, { from: this.options.from, messageId, date: now }), { mode: 0o600 });
    await rename(temporary, target);
    this.options.log.info({ mail_kind: message.kind, to: maskAddress(message.to), message_id: messageId, file: name }, 'mail written to the mailbox');
    return { messageId, location: target };
  }
}

/**
 * The RFC 822 (5322) text of a message: CRLF lines, encoded non-ASCII headers, a UTF-8 text body,
 * and with `html` a multipart/alternative of the text part and the HTML part (text first: the
 * last is the one clients prefer, RFC 2046 §5.1.4).
 */
export function renderMessage(message: MailMessage, envelope: { from: string; messageId: string; date: Date }): string {
  const headers = [
    `From: ${headerValue(envelope.from)}`,
    `To: ${headerValue(message.to)}`,
    `Subject: ${encodeHeaderWord(headerValue(message.subject))}`,
    `Date: ${rfc5322Date(envelope.date)}`,
    `Message-ID: <${envelope.messageId}>`,
    `X-Switchboard-Mail-Kind: ${headerValue(message.kind)}`,
    'MIME-Version: 1.0',
  ];
  if (message.html === undefined) return `${[...headers, ...renderPart('text/plain', message.text)].join('\r\n')}\r\n`;
  const boundary = `=_switchboard_${randomBytes(12).toString('hex')}`;
  return [
    ...headers,
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    ...renderPart('text/plain', message.text),
    `--${boundary}`,
    ...renderPart('text/html', message.html),
    `--${boundary}--`,
    '',
  ].join('\r\n');
}

/** RFC 5322 §2.1.1: no line may exceed 998 octets. */
const maxLineOctets = 998;

/**
 * The header lines, blank line and body lines of one UTF-8 part: 8bit, so the file reads as
 * written (a token stays one line), unless a line is too long for it (long names, escaped):
 * then quoted-printable, whose soft breaks keep every line short.
 */
function renderPart(type: string, content: string): string[] {
  const lines = content.replace(/\r?\n/g, '\n').replace(/\n$/, '').split('\n');
  const fits = lines.every((line) => Buffer.byteLength(line, 'utf8') <= maxLineOctets);
  return [
    `Content-Type: ${type}; charset=utf-8`,
    `Content-Transfer-Encoding: ${fits ? '8bit' : 'quoted-printable'}`,
    '',
    ...(fits ? lines : lines.flatMap(quotedPrintableLines)),
  ];
}

/** One line as quoted-printable (RFC 2045 §6.7): encoded lines of at most 76 characters. */
function quotedPrintableLines(line: string): string[] {
  const out: string[] = [];
  let current = '';
  const bytes = Buffer.from(line, 'utf8');
  for (const [index, byte] of bytes.entries()) {
    const last = index === bytes.length - 1;
    const plain = byte >= 33 && byte <= 126 && byte !== 61;
    const space = (byte === 32 || byte === 9) && !last;
    const encoded = plain || space ? String.fromCharCode(byte) : `=${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    // 75 characters and a soft break ("=") at most per line.
    if (current.length + encoded.length > 75) {
      out.push(`${current}=`);
      current = '';
    }
    current += encoded;
  }
  out.push(current);
  return out;
}

/** Header values never carry line breaks (no header injection). */
function headerValue(value: string): string {
  return value.replace(/[\r\n]+/g, ' ').trim();
}

/** RFC 2047 encoded word for non-ASCII text. */
function encodeHeaderWord(value: string): string {
  return /^[\x20-\x7e]*$/.test(value) ? value : `=?UTF-8?B?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

const weekdays = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function rfc5322Date(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${weekdays[date.getUTCDay()]}, ${pad(date.getUTCDate())} ${months[date.getUTCMonth()]} ${date.getUTCFullYear()} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} +0000`;
}

/** `j***@example.com`: enough to follow a mail in the log without writing the address. */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  if (at <= 0) return '***';
  return `${address[0]}***${address.slice(at)}`;
}
