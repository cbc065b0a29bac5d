import { Code, ConnectError } from '@connectrpc/connect';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { createDb, type Knex } from '@switchboard/runtime/db';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { bootMesh, newUser, restClient } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * A crash between a debit and its event is impossible by construction (docs/api/billing.md#usage-ingestion: the usage row,
 * the debit and the `billing.usage.recorded` outbox row commit in one transaction). Shown by
 * killing billing (SIGKILL: no shutdown hook runs) in the middle of a burst of RecordUsage, then
 * checking in billing's own tables that the balance is the opening credit minus the sum of the usage
 * rows, that every usage row has exactly one event and every event its row, and that retrying the
 * whole burst charges exactly what was lost and nothing twice, up to the keys service's spend.
 */

const burst = 300;
/** Answers to wait for before the kill: the rest of the burst is in flight or queued in billing. */
const killAfterAnswers = 50;
const openingCreditUsd = '1.00';
/** service/fast, 1000 × 0.10/1M + 500 × 0.40/1M (pricing.json). */
const costPerUsage = '0.0003';

let mesh: Mesh;
let call: ReturnType<typeof restClient>;
let dataPlane: ReturnType<typeof meshClient<typeof UsageService>>;
let db: Knex;

beforeAll(async () => {
  mesh = await bootMesh({ SANDBOX_OPENING_CREDIT_USD: openingCreditUsd });
  call = restClient(mesh.gatewayUrl);
  dataPlane = meshClient(UsageService, mesh.urls.billing, 'billing', { caller: 'data-plane' });
  db = createDb(mesh.env.DATABASE_URL, 'billing');
});

afterAll(async () => {
  await db?.destroy();
  await mesh?.stop();
});

interface Invariant {
  balance: string;
  expected: string;
  holds: boolean;
  rows: number;
  sum: string;
}

/** Balance against opening credit − Σ cost_usd of the workspace's usage rows, in Postgres numeric arithmetic. */
async function balanceInvariant(workspaceId: string): Promise<Invariant> {
  const { rows } = await db.raw<{ rows: Array<{ balance: string; expected: string; holds: boolean; rows: number; sum: string }> }>(
    `SELECT a.balance_usd::text AS balance, (?::numeric - u.sum)::text AS expected, a.balance_usd = ?::numeric - u.sum AS holds, u.rows, u.sum::text AS sum
       FROM accounts a,
            LATERAL (SELECT count(*) AS rows, COALESCE(sum(cost_usd), 0) AS sum FROM usage_records WHERE workspace_id = a.workspace_id) u
      WHERE a.workspace_id = ?`,
    [openingCreditUsd, openingCreditUsd, workspaceId],
  );
  expect(rows, `billing account of ${workspaceId}`).toHaveLength(1);
  return rows[0];
}

/** Usage rows of the workspace without exactly one matching event, and usage events without their row. */
async function outboxMismatches(workspaceId: string): Promise<{ rowsWithoutOneEvent: unknown[]; eventsWithoutRow: unknown[] }> {
  const { rows: rowsWithoutOneEvent } = await db.raw<{ rows: unknown[] }>(
    `SELECT u.id, u.generation_id, count(o.id)::int AS events,
            count(o.id) FILTER (WHERE o.payload->'data'->>'generation_id' = u.generation_id
                                  AND (o.payload->'data'->>'cost_usd')::numeric = u.cost_usd
                                  AND o.payload->'data'->>'key_id' = u.key_id)::int AS matching
       FROM usage_records u
       LEFT JOIN outbox o ON o.payload->>'type' = 'billing.usage.recorded' AND o.payload->'data'->>'usage_id' = u.id
      WHERE u.workspace_id = ?
      GROUP BY u.id, u.generation_id
     HAVING count(o.id) <> 1
         OR count(o.id) FILTER (WHERE o.payload->'data'->>'generation_id' = u.generation_id
                                  AND (o.payload->'data'->>'cost_usd')::numeric = u.cost_usd
                                  AND o.payload->'data'->>'key_id' = u.key_id) <> 1`,
    [workspaceId],
  );
  const { rows: eventsWithoutRow } = await db.raw<{ rows: unknown[] }>(
    `SELECT o.event_id, o.payload->'data'->>'usage_id' AS usage_id
       FROM outbox o
      WHERE o.payload->>'type' = 'billing.usage.recorded' AND o.payload->'data'->>'workspace_id' = ?
        AND NOT EXISTS (SELECT 1 FROM usage_records u WHERE u.id = o.payload->'data'->>'usage_id')`,
    [workspaceId],
  );
  return { rowsWithoutOneEvent, eventsWithoutRow };
}

async function usageRows(workspaceId: string): Promise<Map<string, { id: string; cost_usd: string }>> {
  const rows = await db('usage_records').where({ workspace_id: workspaceId }).select('generation_id', 'id', db.raw('cost_usd::text AS cost_usd'));
  return new Map(rows.map((row: { generation_id: string; id: string; cost_usd: string }) => [row.generation_id, row]));
}

/** Both invariants at once: the balance, and one event per usage row. */
async function expectConsistent(workspaceId: string, when: string): Promise<Invariant> {
  const invariant = await balanceInvariant(workspaceId);
  expect(invariant.holds, `${when}: balance ${invariant.balance}, opening credit − Σ usage = ${invariant.expected}`).toBe(true);
  expect(await outboxMismatches(workspaceId), when).toEqual({ rowsWithoutOneEvent: [], eventsWithoutRow: [] });
  return invariant;
}

describe('billing killed in the middle of a burst of usage', () => {
  it('keeps balance = opening credit − Σ usage and one event per usage row; a retry of the burst charges what was lost, once', async () => {
    const registered = await call('POST', '/v1/auth/register', { body: newUser() });
    expect(registered.status, registered.text).toBe(201);
    const token: string = registered.json.session.access_token;
    const workspaceId: string = registered.json.user.personal_workspace_id;
    const key = await call('POST', '/v1/keys', { token, body: { name: 'crash test' } });
    expect(key.status, key.text).toBe(201);
    const keyId: string = key.json.key.key_id;

    const generationIds = Array.from({ length: burst }, (_, i) => `gen_crash_${Date.now().toString(36)}_${i}`);
    const request = (generationId: string) => ({ generationId, keyId, workspaceId, model: 'service/fast', inputTokens: 1000n, outputTokens: 500n });

    // The burst: every call at once; billing takes them a pool's worth at a time, so when the
    // 50th answer arrives the others are in its transactions, waiting for a connection or unread.
    const billingPid = mesh.pid('billing');
    expect(billingPid).toBeDefined();
    const answered = new Map<string, { usageId: string; costUsd: string }>();
    const failed = new Map<string, Code>();
    let killed = false;
    await Promise.all(
      generationIds.map((generationId) =>
        dataPlane.recordUsage(request(generationId), { timeoutMs: 20_000 }).then(
          (answer) => {
            expect(answer.duplicate).toBe(false);
            answered.set(generationId, { usageId: answer.usageId, costUsd: answer.costUsd });
            if (!killed && answered.size >= killAfterAnswers) {
              killed = true;
              process.kill(billingPid!, 'SIGKILL');
            }
          },
          (err: unknown) => {
            failed.set(generationId, ConnectError.from(err).code);
          },
        ),
      ),
    );
    expect(killed).toBe(true);
    // The kill landed mid-burst: some calls never got an answer.
    expect(failed.size).toBeGreaterThan(0);
    expect(answered.size + failed.size).toBe(burst);

    await mesh.startComponent('billing');
    expect(mesh.pid('billing')).not.toBe(billingPid);

    // What the dead process committed, and nothing half-done.
    const before = await usageRows(workspaceId);
    const afterCrash = await expectConsistent(workspaceId, 'after the crash');
    expect(afterCrash.rows).toBe(before.size);
    // Every call answered before the kill is recorded, as answered.
    for (const [generationId, answer] of answered) {
      expect(before.get(generationId), generationId).toEqual({ generation_id: generationId, id: answer.usageId, cost_usd: costPerUsage });
    }
    // No row for a generation outside the burst, and none the kill made up.
    for (const generationId of before.keys()) expect(generationIds).toContain(generationId);
    expect(before.size).toBeGreaterThanOrEqual(answered.size);
    expect(before.size).toBeLessThan(burst);

    // The data plane retries every generation of the burst: those recorded answer their first
    // result as duplicates, the others are charged now. The first calls wait until the new
    // process answers.
    const retry = (generationId: string) =>
      eventually(() => dataPlane.recordUsage(request(generationId), { timeoutMs: 10_000 }), `billing to answer ${generationId} after the restart`, 30_000, 100);
    const retried = new Map<string, { usageId: string; duplicate: boolean; costUsd: string }>();
    for (let i = 0; i < generationIds.length; i += 25) {
      const batch = generationIds.slice(i, i + 25);
      const answers = await Promise.all(batch.map(retry));
      for (const [j, generationId] of batch.entries()) retried.set(generationId, answers[j]);
    }
    for (const generationId of generationIds) {
      const answer = retried.get(generationId)!;
      const first = before.get(generationId);
      expect({ generationId, duplicate: answer.duplicate }).toEqual({ generationId, duplicate: first !== undefined });
      if (first) expect(answer.usageId).toBe(first.id);
      expect(answer.costUsd).toBe(costPerUsage);
    }

    // Every generation once, the balance and the events still in step.
    const after = await usageRows(workspaceId);
    expect(after.size).toBe(burst);
    const final = await expectConsistent(workspaceId, 'after the retries');
    // 300 × 0.0003 = 0.09 charged in all; 1.00 − 0.09 = 0.91.
    const { rows: totals } = await db.raw<{ rows: Array<{ sum_ok: boolean; balance_ok: boolean }> }>(
      'SELECT ?::numeric = ?::numeric * ? AS sum_ok, ?::numeric = ?::numeric - ?::numeric * ? AS balance_ok',
      [final.sum, costPerUsage, burst, final.balance, openingCreditUsd, costPerUsage, burst],
    );
    expect(totals[0], `Σ usage ${final.sum}, balance ${final.balance}`).toEqual({ sum_ok: true, balance_ok: true });

    // The events reach the keys service once each (the restarted relay publishes what the dead
    // one had not; the consumer drops redeliveries): the key's month-to-date spend is Σ usage.
    let lastSpend: unknown;
    await eventually(
      async () => {
        const response = await call('GET', `/v1/keys/${keyId}`, { token });
        lastSpend = response.json?.month_to_date_spend_usd;
        if (typeof lastSpend !== 'string') return false;
        const { rows } = await db.raw<{ rows: Array<{ same: boolean }> }>(
          'SELECT ?::numeric = COALESCE(sum(cost_usd), 0) AS same FROM usage_records WHERE key_id = ?',
          [lastSpend, keyId],
        );
        return rows[0].same;
      },
      `the key's month-to-date spend to reach Σ usage ${final.sum}`,
      30_000,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message} (last seen: ${String(lastSpend)})`);
    });
    // And the outbox holds no usage event of the workspace left unpublished by the dead relay.
    await eventually(async () => {
      const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
        `SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL AND payload->>'type' = 'billing.usage.recorded' AND payload->'data'->>'workspace_id' = ?`,
        [workspaceId],
      );
      return rows[0].n === 0;
    }, 'every usage event of the workspace to be marked published');
    const failures: Record<string, number> = {};
    for (const code of failed.values()) failures[Code[code]] = (failures[Code[code]] ?? 0) + 1;
    console.log(
      `billing-crash: ${answered.size} answered before the kill, ${before.size - answered.size} committed but unanswered, ${burst - before.size} lost and charged on retry; failed calls: ${JSON.stringify(failures)}`,
    );
  });
});
