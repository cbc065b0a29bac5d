import { eventually } from '@switchboard/runtime/testing';
import * as OTPAuth from 'otpauth';

export { mailsTo, tokenOf, waitForMail } from './mailbox.js';
export { expectErrorBody } from './mesh.js';
export { eventually };

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
