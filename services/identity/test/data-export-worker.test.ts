import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { ActionLimits, readActionLimits } from '@switchboard/identity/action-limits';
import { DataExports, exportMaxAttempts, retryDelayMs } from '@switchboard/identity/data-exports';
import { AccountMail } from '@switchboard/identity/notifications';
import { insertPendingExport } from '@switchboard/identity/store/data-exports';
import { insertOrganization } from '@switchboard/identity/store/organizations';
import { insertUser } from '@switchboard/identity/store/users';
import { AuditTrail } from '@switchboard/runtime/audit';
import { createDb, type Knex, migrate } from '@switchboard/runtime/db';
import { newId } from '@switchboard/runtime/ids';
import { createLogger } from '@switchboard/runtime/log';
import type { MailMessage } from '@switchboard/runtime/mail';
import { recordEvent } from '@switchboard/runtime/outbox';
import { DataKeyRing } from '@switchboard/runtime/secrets';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, requireEnv } from './helpers.js';

/**
 * The data export's worker on its own (docs/api/identity.md#data-export), against a migrated
 * schema of its own, with fake keys and conversations services and time moved by a clock:
 * retries with back-off, `failed` after the last attempt, a recovery, the mail, the expiry.
 */

const schema = `identity_export_${randomBytes(3).toString('hex')}`;
const log = createLogger('export-test', 'silent');
let db: Knex;
let now = new Date();
const advance = (ms: number) => {
  now = new Date(now.getTime() + ms);
};
const dataKeys = DataKeyRing.parse(DataKeyRing.generateEntry('k1'));
const sent: MailMessage[] = [];
let keysAnswer: () => Promise<unknown>;

let exports: DataExports;

beforeAll(async () => {
  db = createDb(requireEnv('DATABASE_URL'), schema, 4);
  await migrate(db, schema, path.join(repoRoot, 'services/identity/dist/migrations'));
  const writeEvent: ConstructorParameters<typeof AuditTrail>[0]['recordEvent'] = (trx, s, event) =>
    recordEvent(trx, s, event, { producer: 'identity', subjectPrefix: 'test' });
  exports = new DataExports({
    db,
    log,
    dataKeys,
    audit: new AuditTrail({ db, log, recordEvent: writeEvent }),
    limits: new ActionLimits({ db, limits: readActionLimits({}) }),
    mail: new AccountMail({
      log,
      publicUrl: 'https://switchboard.example',
      mailer: {
        async send(message) {
          sent.push(message);
          return { messageId: 'm', location: 'memory' };
        },
      },
    }),
    // biome-ignore lint/suspicious/noExplicitAny: a fake client answers what the test says.
    keys: { exportUserKeys: () => keysAnswer() as any },
    conversations: {
      // biome-ignore lint/suspicious/noExplicitAny: a fake client.
      exportUserConversations: async () => ({ conversations: [], feedback: [] }) as any,
    },
    clock: () => now,
  });
});

afterAll(async () => {
  await db.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
  await db.destroy();
});

async function pendingExport() {
  const orgId = newId('org');
  await insertOrganization(db, { id: orgId, name: 'Personal', personal: true });
  const user = await insertUser(db, {
    id: newId('usr'),
    email: `${orgId.toLowerCase()}@example.com`,
    fullName: null,
    passwordHash: 'h',
    personalWorkspaceId: orgId,
  });
  const row = await db.transaction((trx) => insertPendingExport(trx, { id: newId('exp'), userId: user.id, now }));
  return { user, exportId: row!.id };
}

const rowOf = (id: string) => db('data_exports').where({ id }).first('status', 'attempts', 'next_attempt_at', 'last_error', 'expires_at', 'ready_at');
const unavailable = () => Promise.reject(new ConnectError('keys is away', Code.Unavailable));

describe('the data export worker', () => {
  it('retries a failed build with back-off and ends failed after the last attempt, without a mail', async () => {
    keysAnswer = unavailable;
    const { user, exportId } = await pendingExport();
    for (let attempt = 1; attempt <= exportMaxAttempts; attempt++) {
      await exports.runDue();
      const row = await rowOf(exportId);
      expect(row.attempts).toBe(attempt);
      expect(row.last_error).toContain('keys is away');
      if (attempt < exportMaxAttempts) {
        expect(row.status).toBe('pending');
        expect(row.next_attempt_at.getTime()).toBe(now.getTime() + retryDelayMs(attempt));
        // Not due before its back-off.
        await exports.runDue();
        expect((await rowOf(exportId)).attempts).toBe(attempt);
        advance(retryDelayMs(attempt));
      } else {
        expect(row.status).toBe('failed');
      }
    }
    expect([30_000, 60_000, 120_000, 240_000]).toEqual([1, 2, 3, 4].map(retryDelayMs));
    await expect(exports.download(user.id, exportId, {} as never)).rejects.toMatchObject({
      code: Code.FailedPrecondition,
      rawMessage: expect.stringContaining('could not be built'),
    });
    expect(sent.filter((mail) => mail.to === user.email)).toEqual([]);
  });

  it('recovers when the keys service is back, mails the link, and expires 7 days later', async () => {
    keysAnswer = unavailable;
    const { user, exportId } = await pendingExport();
    await exports.runDue();
    keysAnswer = async () => ({ keys: [], truncated: false });
    advance(retryDelayMs(1));
    await exports.runDue();
    const row = await rowOf(exportId);
    expect(row).toMatchObject({ status: 'ready', attempts: 2, last_error: null });
    expect(row.expires_at.getTime() - row.ready_at.getTime()).toBe(7 * 24 * 3600 * 1000);
    const mail = sent.find((m) => m.to === user.email);
    expect(mail).toMatchObject({ kind: 'data_export_ready' });
    expect(mail?.text).toContain(`https://switchboard.example/app/account/exports/${exportId}`);
    const body = await exports.download(user.id, exportId, {} as never);
    expect(JSON.parse(Buffer.from(body.data as Uint8Array).toString('utf8'))).toMatchObject({ export_id: exportId, account: { user_id: user.id }, keys: [] });

    advance(7 * 24 * 3600 * 1000);
    await expect(exports.download(user.id, exportId, {} as never)).rejects.toMatchObject({ rawMessage: expect.stringContaining('older than 7 days') });
    expect(await exports.sweep()).toBeGreaterThanOrEqual(1);
    expect(await db('data_exports').where({ id: exportId }).first('status', 'document_encrypted')).toEqual({ status: 'expired', document_encrypted: null });
  });
});
