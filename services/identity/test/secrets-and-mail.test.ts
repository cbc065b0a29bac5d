import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readIdentityConfig } from '@switchboard/identity/config';
import { createLogger } from '@switchboard/runtime/log';
import { composeMail, createMailer, mailFileName, maskAddress, renderMessage, SmtpMailer } from '@switchboard/runtime/mail';
import { linksOf, parseMail } from '@switchboard/testkit/mailbox';
import { describe, expect, it } from 'vitest';
import { AccountMail } from '../src/notifications.js';

/** runtime/src/mail.ts and identity's account mails. */

describe('mail adapter', () => {
  it('writes one RFC 822 file per message, names sorting by time', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'mail-test-'));
    const dir = path.join(root, 'nested/mailbox');
    const mailer = createMailer({ log: createLogger('test', 'silent'), env: { MAILBOX_DIR: dir } });
    for (let i = 0; i < 5; i++) await mailer.send({ to: 'a@example.com', subject: `n${i}`, text: `body ${i}\nline two`, kind: 'test' });
    const names = (await readdir(dir)).filter((name) => name.endsWith('.eml'));
    expect(names).toHaveLength(5);
    const subjects = await Promise.all([...names].sort().map(async (name) => /^Subject: (.*)$/m.exec(await readFile(path.join(dir, name), 'utf8'))![1].trim()));
    expect(subjects).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    expect(await readdir(dir)).toHaveLength(5); // no temporary files left
    await rm(root, { recursive: true, force: true });
  });

  it('keeps headers on one line and encodes non-ASCII subjects', () => {
    const text = renderMessage(
      { to: 'a@example.com\r\nBcc: evil@example.com', subject: 'Grüße', text: 'x', kind: 'test' },
      { from: 'S <s@example.com>', messageId: 'id@example.com', date: new Date('2025-01-02T03:04:05Z') },
    );
    const headers = text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n');
    expect(headers.some((line) => line.startsWith('Bcc:'))).toBe(false);
    expect(headers).toContain(`Subject: =?UTF-8?B?${Buffer.from('Grüße').toString('base64')}?=`);
    expect(headers).toContain('Date: Thu, 02 Jan 2025 03:04:05 +0000');
  });

  it('chooses SMTP when SMTP_URL is set, and refuses a URL that is not smtp:// or smtps://', () => {
    expect(createMailer({ log: createLogger('test', 'silent'), env: { SMTP_URL: 'smtp://localhost:2525' } })).toBeInstanceOf(SmtpMailer);
    expect(() => createMailer({ log: createLogger('test', 'silent'), env: { SMTP_URL: 'http://localhost' } })).toThrow(/smtp:\/\//);
  });

  it('requires SMTP_URL in production, and never lets production send in the clear', () => {
    const log = createLogger('test', 'silent');
    expect(() => createMailer({ log, env: { NODE_ENV: 'production', MAILBOX_DIR: tmpdir() } })).toThrow(/SMTP_URL is required when NODE_ENV=production/);
    expect(() => createMailer({ log, env: { NODE_ENV: 'production', SMTP_URL: 'smtp://mail:587?ignoreTLS=true' } })).toThrow(/ignoreTLS is refused/);
    expect(createMailer({ log, env: { NODE_ENV: 'production', SMTP_URL: 'smtps://mail:465' } })).toBeInstanceOf(SmtpMailer);
  });

  it('refuses to send over smtp:// to a server that offers no STARTTLS', async () => {
    const received: string[] = [];
    const server = minimalSmtpServer(received);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const mailer = createMailer({ log: createLogger('test', 'silent'), env: { SMTP_URL: `smtp://127.0.0.1:${port}` } }) as SmtpMailer;
    try {
      await expect(mailer.send({ to: 'jane@example.com', subject: 'Hello', text: 'a token', kind: 'test_kind' })).rejects.toThrow(/TLS/);
      expect(received).toHaveLength(0);
    } finally {
      mailer.close();
      server.close();
    }
  });

  it('delivers over SMTP (to a minimal SMTP server)', async () => {
    const received: string[] = [];
    const server = minimalSmtpServer(received);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const mailer = createMailer({ log: createLogger('test', 'silent'), env: { SMTP_URL: `smtp://127.0.0.1:${port}?ignoreTLS=true` } }) as SmtpMailer;
    try {
      const sent = await mailer.send({ to: 'jane@example.com', subject: 'Hello', kind: 'test_kind', ...composeMail('Hello', [['token line', 'second line']]) });
      expect(sent.messageId).toMatch(/@switchboard\.local$/);
      expect(received).toHaveLength(1);
      expect(received[0]).toContain('To: jane@example.com');
      expect(received[0]).toContain('Subject: Hello');
      expect(received[0]).toContain('X-Switchboard-Mail-Kind: test_kind');
      expect(received[0]).toContain('token line');
      // Both parts travel over SMTP too.
      expect(received[0]).toMatch(/Content-Type: multipart\/alternative/);
      expect(received[0]).toMatch(/Content-Type: text\/html/);
    } finally {
      mailer.close();
      server.close();
    }
  });

  it('writes account mails: a credential notice without secrets, the reset token and its link, each with an HTML part', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'account-mail-'));
    try {
      const mail = new AccountMail({
        mailer: createMailer({ log: createLogger('test', 'silent'), env: { MAILBOX_DIR: dir } }),
        log: createLogger('test', 'silent'),
        publicUrl: 'https://sb.example',
      });
      await mail.credentialChanged({ id: 'usr_1', email: 'ann@example.com', fullName: 'Ann' }, 'two_factor_disabled');
      await mail.passwordReset({ id: 'usr_1', email: 'ann@example.com', fullName: null }, 'reset-token-value', 60);
      await mail.invitation({ id: 'inv_1', email: 'bo@example.com', role: 'admin', expiresAt: new Date() }, 'invitation-token', '<b>Acme & "Co"</b>', 'Ann');
      const names = (await readdir(dir)).sort();
      const [notice, reset, invitation] = await Promise.all(names.map(async (name) => parseMail(name, await readFile(path.join(dir, name), 'utf8'))));
      expect(notice.kind).toBe('two_factor_disabled');
      expect(notice.text).toContain('Two-factor authentication was turned off');
      expect(linksOf(notice).html).toEqual(['https://sb.example/app/reset-password']);
      expect(reset.kind).toBe('password_reset_request');
      expect(reset.text).toMatch(/\r\nreset-token-value\r\n/);
      expect(reset.html).toContain('reset-token-value');
      expect(linksOf(reset)).toEqual({
        text: ['https://sb.example/app/reset-password/confirm#token=reset-token-value'],
        html: ['https://sb.example/app/reset-password/confirm#token=reset-token-value'],
      });
      // A name is text in the HTML part, never markup.
      expect(invitation.text).toContain('"<b>Acme & "Co"</b>"');
      expect(invitation.html).toContain('&#60;b&#62;Acme &#38; &#34;Co&#34;&#60;/b&#62;');
      expect(invitation.html).not.toContain('<b>');
      expect(linksOf(invitation).text).toEqual(['https://sb.example/app/invitations/accept#token=invitation-token']);
      for (const sent of [notice, reset, invitation]) {
        expect(sent.headers['content-type']).toMatch(/^multipart\/alternative; boundary="[^"]+"$/);
        // Nothing for the client to fetch: no remote image, stylesheet or script.
        expect(sent.html).not.toMatch(/<(img|link|script|iframe)\b|src=|url\(/i);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps each line of a part within 998 octets: quoted-printable when a line would not fit', () => {
    const long = 'é'.repeat(600);
    const raw = renderMessage(
      { to: 'a@example.com', subject: 's', kind: 'test', ...composeMail('s', [long, { token: 'tok' }]) },
      { from: 'S <s@example.com>', messageId: 'id@example.com', date: new Date() },
    );
    for (const line of raw.split('\r\n')) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(998);
    expect(raw).toContain('Content-Transfer-Encoding: quoted-printable');
    const parsed = parseMail('x.eml', raw);
    expect(parsed.text).toBe(`${long}\r\n\r\ntok`);
    expect(parsed.html).toContain(`<p>${long}</p>`);
  });

  it('reads PUBLIC_BASE_URL, where mailed links lead: a URL, required and https in production', () => {
    expect(readIdentityConfig({}).publicUrl).toBe('http://localhost:8080');
    expect(readIdentityConfig({ PUBLIC_BASE_URL: 'https://sb.example/' }).publicUrl).toBe('https://sb.example');
    expect(() => readIdentityConfig({ PUBLIC_BASE_URL: 'sb.example' })).toThrow(/PUBLIC_BASE_URL is not a URL/);
    expect(() => readIdentityConfig({ PUBLIC_BASE_URL: 'ftp://sb.example' })).toThrow(/PUBLIC_BASE_URL must start with https/);
    expect(() => readIdentityConfig({ NODE_ENV: 'production' })).toThrow(/PUBLIC_BASE_URL is required when NODE_ENV=production/);
    expect(() => readIdentityConfig({ NODE_ENV: 'production', PUBLIC_BASE_URL: 'http://sb.example' })).toThrow(/PUBLIC_BASE_URL must start with https/);
    expect(readIdentityConfig({ NODE_ENV: 'production', PUBLIC_BASE_URL: 'https://sb.example' }).publicUrl).toBe('https://sb.example');
  });

  it('names files by time and masks addresses', () => {
    const earlier = mailFileName(new Date('2025-01-02T03:04:05.006Z'));
    const later = mailFileName(new Date('2025-01-02T03:04:05.007Z'));
    expect(earlier < later).toBe(true);
    expect(earlier).toMatch(/^20250102T030405\.006Z-\d{6}-[0-9a-f]{8}\.eml$/);
    expect(maskAddress('jane@example.com')).toBe('j***@example.com');
  });
});

/** An SMTP server that accepts everything and offers no STARTTLS; what it receives goes to `received`. */
function minimalSmtpServer(received: string[]): net.Server {
  return net.createServer((socket) => {
    let inData = false;
    let data = '';
    let pending = '';
    socket.write('220 test ESMTP\r\n');
    socket.on('data', (chunk) => {
      pending += chunk.toString('utf8');
      for (let end = pending.indexOf('\r\n'); end >= 0; end = pending.indexOf('\r\n')) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            received.push(data);
            socket.write('250 2.0.0 queued\r\n');
          } else data += `${line}\r\n`;
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-test\r\n250 8BITMIME\r\n');
        else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else if (verb === 'STAR') socket.write('502 5.5.1 STARTTLS not supported\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
}
