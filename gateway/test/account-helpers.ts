import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import * as OTPAuth from 'otpauth';
import { expect } from 'vitest';
import type { ApiResponse } from './mesh.js';
import { eventually } from '@switchboard/runtime/testing';

export { eventually };

export function expectErrorBody(response: ApiResponse, status: number, code?: string, field?: string | null) {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('x-request-id')).toBeTruthy();
  expect(response.json?.error).toMatchObject({ message: expect.any(String), request_id: response.headers.get('x-request-id') });
  expect('field' in response.json.error).toBe(true);
  if (code) expect(response.json.error.code).toBe(code);
  if (field !== undefined) expect(response.json.error.field).toBe(field);
}

export interface Mail {
  name: string;
  kind: string;
  subject: string;
  body: string;
}

/** The mails of the mailbox addressed to `to`, oldest first. */
export async function mailsTo(dir: string, to: string): Promise<Mail[]> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.eml')).sort();
  const mails: Mail[] = [];
  for (const name of names) {
    const text = await readFile(path.join(dir, name), 'utf8');
    const split = text.indexOf('\r\n\r\n');
    const headers: Record<string, string> = {};
    for (const line of text.slice(0, split).split('\r\n')) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (headers.to === to) mails.push({ name, kind: headers['x-switchboard-mail-kind'], subject: headers.subject, body: text.slice(split + 4) });
  }
  return mails;
}

/** Waits for the `count`-th mail of `kind` to `to` and returns it. */
export function waitForMail(dir: string, to: string, kind: string, count = 1): Promise<Mail> {
  return eventually(async () => (await mailsTo(dir, to)).filter((mail) => mail.kind === kind)[count - 1], `mail ${kind} #${count} to ${to}`);
}

/** The token line of a mail (43 base64url characters). */
export function tokenOf(mail: Mail): string {
  const line = mail.body.split(/\r?\n/).find((candidate) => /^[A-Za-z0-9_-]{43}$/.test(candidate.trim()));
  if (!line) throw new Error(`no token in mail ${mail.name}`);
  return line.trim();
}

/**
 * An authenticator app for tests: codes of strictly increasing time steps (the service accepts
 * a step once), chosen within the ±1 step window; waits for the next step when none is left.
 */
export class TestAuthenticator {
  private lastStep = -Infinity;
  private readonly totp: OTPAuth.TOTP;

  constructor(readonly secret: string) {
    this.totp = new OTPAuth.TOTP({ algorithm: 'SHA1', digits: 6, period: 30, secret: OTPAuth.Secret.fromBase32(secret) });
  }

  /** A code no earlier than the last one handed out: the previous step while > 5 s of the current remain. */
  async code(): Promise<string> {
    for (;;) {
      const now = Date.now();
      const current = Math.floor(now / 30_000);
      const remaining = (current + 1) * 30_000 - now;
      const earliest = remaining > 5_000 ? current - 1 : current;
      const step = Math.max(this.lastStep + 1, earliest);
      if (step <= current + 1) {
        this.lastStep = step;
        return this.totp.generate({ timestamp: step * 30_000 });
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** The code of a step already used (to prove a code is never accepted twice). */
  codeOfLastStep(): string {
    return this.totp.generate({ timestamp: this.lastStep * 30_000 });
  }

  /** Six digits that are no valid code around now. */
  wrongCode(): string {
    const valid = new Set([-1, 0, 1].map((delta) => this.totp.generate({ timestamp: Date.now() + delta * 30_000 })));
    for (let n = 0; ; n++) {
      const candidate = String((123456 + n * 7919) % 1_000_000).padStart(6, '0');
      if (!valid.has(candidate)) return candidate;
    }
  }
}
