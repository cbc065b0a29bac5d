import { serviceNames } from '@switchboard/contracts/components';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import pg from 'pg';
import { type LoadAccount, type MixedLoad, retryable } from './mixed-load.js';
import { type ChaosWorld, webhookPath } from './world.js';

/** One invariant of a chaos run and whether it held. */
export interface InvariantResult {
  name: string;
  holds: boolean;
  detail: string;
}

export interface InvariantOptions {
  /**
   * Whether an append that got a retryable answer before its success may be stored twice. After
   * a kill -9 it may: the process can die after its commit and before its answer, and the REST
   * append has no idempotency key. After a graceful restart it may not.
   */
  retriedAppendsMayRepeat: boolean;
  /** How long effects that travel through NATS (spend, deliveries, the outboxes) may take to settle. */
  settleMs: number;
}

/**
 * Checks what the load was told against what the system holds, once the load has stopped:
 * every attempt answered cleanly, no operation lost, every acknowledged usage charged exactly
 * once with the balance in step, every usage event applied to the key's spend, every
 * acknowledged append stored, every acknowledged event delivered once to the endpoint, and no
 * event left in an outbox.
 */
export async function checkInvariants(world: ChaosWorld, load: MixedLoad, account: LoadAccount, options: InvariantOptions): Promise<InvariantResult[]> {
  const db = new pg.Client({ connectionString: world.postgres.url });
  await db.connect();
  try {
    const results: InvariantResult[] = [answeredCleanly(load), nothingLost(load)];
    results.push(await usageCharged(db, load, account, options.settleMs));
    results.push(await balanceInStep(db, account, world.openingCreditUsd));
    results.push(await spendInStep(db, world, account, options.settleMs));
    results.push(await appendsStored(db, load, account, options.retriedAppendsMayRepeat));
    results.push(await eventsDelivered(world, load, options.settleMs));
    results.push(await outboxesDrained(db, options.settleMs));
    return results;
  } finally {
    await db.end();
  }
}

const countBy = <T>(items: T[], key: (item: T) => string) => {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
};

function answeredCleanly(load: MixedLoad): InvariantResult {
  const bad = load.attempts.filter((attempt) => attempt.outcome !== 'ok' && !retryable.has(attempt.outcome));
  const at = (attempt: (typeof bad)[number]) => `${((attempt.at - load.startedAt) / 1000).toFixed(1)} s`;
  const maxMs = Math.max(0, ...load.attempts.map((attempt) => attempt.ms));
  return {
    name: 'every request answered: success or 503 + Retry-After, never a hang, reset or other error',
    holds: bad.length === 0,
    detail: bad.length
      ? `${bad.length} bad: ${JSON.stringify(countBy(bad, (a) => a.outcome))}; first: ${bad
          .slice(0, 3)
          .map((a) => `${a.kind} ${a.outcome} at ${at(a)} ${a.detail ?? ''}`.trim())
          .join(' | ')}`
      : `${load.attempts.length} attempts, slowest ${maxMs} ms`,
  };
}

function nothingLost(load: MixedLoad): InvariantResult {
  const { failedOperations: failed, acknowledged } = load;
  return {
    name: 'no request lost: every operation acknowledged after retries',
    holds: failed.length === 0,
    detail: failed.length
      ? `${failed.length} given up: ${JSON.stringify(countBy(failed, (f) => `${f.kind}/${f.last}`))}`
      : `${acknowledged.signIns} sign-ins, ${acknowledged.completions.size} key checks, ${acknowledged.appends.size} appends, ${acknowledged.events.size} events`,
  };
}

/** Every completion the front door answered has its usage row, once, at the cost it answered. */
async function usageCharged(db: pg.Client, load: MixedLoad, account: LoadAccount, settleMs: number): Promise<InvariantResult> {
  const name = 'no lost usage: every acknowledged completion charged exactly once, at the cost it answered';
  const missing = async () => {
    const { rows } = await db.query<{ generation_id: string; cost_usd: string }>(
      'SELECT generation_id, cost_usd::text AS cost_usd FROM billing.usage_records WHERE workspace_id = $1',
      [account.workspaceId],
    );
    const charged = new Map(rows.map((row) => [row.generation_id, row.cost_usd]));
    return [...load.acknowledged.completions].filter(([id, cost]) => charged.get(id) === undefined || !new Money(charged.get(id)!).eq(cost));
  };
  // Usage is settled in batches after the answer (docs/money-path.md#usage): give it the settle time.
  const settled = await eventually(async () => (await missing()).length === 0, 'every acknowledged usage to be recorded', settleMs, 200).catch(() => false);
  const left = settled ? [] : await missing();
  return {
    name,
    holds: left.length === 0,
    detail: left.length
      ? `${left.length} missing or at another cost, e.g. ${left[0][0]}`
      : `${load.acknowledged.completions.size} charged at the cost answered`,
  };
}

/** Balance = opening credit − Σ usage, in Postgres numeric arithmetic (a double charge would break it). */
async function balanceInStep(db: pg.Client, account: LoadAccount, openingCreditUsd: string): Promise<InvariantResult> {
  const { rows } = await db.query<{ balance: string; expected: string; holds: boolean; rows: number; distinct_generations: number }>(
    `SELECT a.balance_usd::text AS balance, ($1::numeric - u.sum)::text AS expected, a.balance_usd = $1::numeric - u.sum AS holds,
            u.rows, u.distinct_generations
       FROM billing.accounts a,
            LATERAL (SELECT count(*)::int AS rows, count(DISTINCT generation_id)::int AS distinct_generations, COALESCE(sum(cost_usd), 0) AS sum
                       FROM billing.usage_records WHERE workspace_id = a.workspace_id) u
      WHERE a.workspace_id = $2`,
    [openingCreditUsd, account.workspaceId],
  );
  const row = rows[0];
  const holds = Boolean(row?.holds) && row.rows === row.distinct_generations;
  return {
    name: 'no double charge: balance = opening credit − Σ usage, one row per generation',
    holds,
    detail: row ? `balance ${row.balance}, expected ${row.expected}, ${row.rows} rows / ${row.distinct_generations} generations` : 'no billing account',
  };
}

/** The key's month-to-date spend (keys, from billing.usage.recorded events) reaches Σ usage of the key. */
async function spendInStep(db: pg.Client, world: ChaosWorld, account: LoadAccount, settleMs: number): Promise<InvariantResult> {
  let last = '';
  let expected = '';
  const same = async () => {
    const response = await fetch(`${world.mesh.gatewayUrl}/v1/keys/${account.keyId}`, {
      headers: { authorization: `Bearer ${account.token}` },
      signal: AbortSignal.timeout(5000),
    });
    const json = (await response.json()) as { month_to_date_spend_usd?: string };
    last = json.month_to_date_spend_usd ?? `HTTP ${response.status}`;
    const { rows } = await db.query<{ sum: string; same: boolean }>(
      'SELECT COALESCE(sum(cost_usd), 0)::text AS sum, COALESCE(sum(cost_usd), 0) = $1::numeric AS same FROM billing.usage_records WHERE key_id = $2',
      [json.month_to_date_spend_usd ?? '-1', account.keyId],
    );
    expected = rows[0].sum;
    return rows[0].same;
  };
  const holds = await eventually(same, "the key's spend to reach Σ usage", settleMs, 200).then(
    () => true,
    () => false,
  );
  return { name: "no lost event: the key's spend (from usage events) = Σ usage", holds, detail: `spend ${last}, Σ usage ${expected}` };
}

async function appendsStored(db: pg.Client, load: MixedLoad, account: LoadAccount, retriedMayRepeat: boolean): Promise<InvariantResult> {
  const { rows } = await db.query<{ content: string; n: number }>(
    'SELECT content, count(*)::int AS n FROM conversations.messages WHERE conversation_id = $1 GROUP BY content',
    [account.conversationId],
  );
  const stored = new Map(rows.map((row) => [row.content, row.n]));
  let missing = 0;
  let repeated = 0;
  let repeatedAfterRetry = 0;
  for (const [content, { retried }] of load.acknowledged.appends) {
    const n = stored.get(content) ?? 0;
    if (n === 0) missing++;
    else if (n > 1 && retried) repeatedAfterRetry++;
    else if (n > 1) repeated++;
  }
  const holds = missing === 0 && repeated === 0 && (retriedMayRepeat || repeatedAfterRetry === 0);
  return {
    name: retriedMayRepeat
      ? 'no lost write: every acknowledged append stored (twice only if retried)'
      : 'no lost write: every acknowledged append stored exactly once',
    holds,
    detail: `${load.acknowledged.appends.size} acknowledged, ${missing} missing, ${repeated} repeated, ${repeatedAfterRetry} repeated after a retry`,
  };
}

/** Every acknowledged agent.completed event reaches the endpoint as exactly one delivery (one webhook-id). */
async function eventsDelivered(world: ChaosWorld, load: MixedLoad, settleMs: number): Promise<InvariantResult> {
  const deliveriesBySeq = () => {
    const bySeq = new Map<number, Set<string>>();
    for (const request of world.receiver.at(webhookPath)) {
      const seq = (JSON.parse(request.body) as { data?: { seq?: number } }).data?.seq;
      if (typeof seq !== 'number') continue;
      const ids = bySeq.get(seq) ?? new Set<string>();
      ids.add(String(request.headers['webhook-id']));
      bySeq.set(seq, ids);
    }
    return bySeq;
  };
  const undelivered = () => [...load.acknowledged.events.keys()].filter((seq) => !deliveriesBySeq().has(seq));
  await eventually(() => undelivered().length === 0, 'every acknowledged event to be delivered', settleMs, 200).catch(() => undefined);
  const missing = undelivered();
  const twice = [...deliveriesBySeq()].filter(([, ids]) => ids.size > 1);
  return {
    name: 'no lost delivery: every acknowledged event delivered, as one delivery',
    holds: missing.length === 0 && twice.length === 0,
    detail: `${load.acknowledged.events.size} acknowledged, ${missing.length} undelivered, ${twice.length} with two deliveries`,
  };
}

async function outboxesDrained(db: pg.Client, settleMs: number): Promise<InvariantResult> {
  const pending = async () => {
    const { rows } = await db.query<{ name: string; n: number }>(
      serviceNames.map((name) => `SELECT '${name}' AS name, count(*)::int AS n FROM ${name}.outbox WHERE published_at IS NULL`).join(' UNION ALL '),
    );
    return rows.filter((row) => row.n > 0).map((row) => [row.name, row.n] as const);
  };
  await eventually(async () => (await pending()).length === 0, 'every outbox to be published', settleMs, 200).catch(() => undefined);
  const left = await pending();
  return {
    name: 'no event stuck: every outbox published',
    holds: left.length === 0,
    detail: left.length ? left.map(([name, n]) => `${name}: ${n}`).join(', ') : 'all published',
  };
}
