import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import pg from 'pg';
import { createKey, registerUser } from '../gateway-accounts.js';
import type { InvariantResult } from './invariants.js';
import { chaosModel } from './mixed-load.js';
import type { ChaosWorld } from './world.js';

/**
 * The money path under faults (docs/money-path.md#faults): a load of chat completions through the
 * front door, streamed and not, from accounts whose budgets run out during the run (a key's cap,
 * a workspace's prepaid balance), and the invariants that must hold afterwards whatever was
 * killed or restarted meanwhile: no usage lost, none counted twice, no cap passed, no balance
 * below zero, every key's spend in step with its usage.
 */

/** One account of the load: a workspace (its own balance) and an API key, with a cap or not. */
export interface MoneyAccount {
  label: string;
  token: string;
  workspaceId: string;
  keyId: string;
  fullKey: string;
  /** The key's monthly cap, when it has one. */
  capUsd?: string;
  /** Workers of the load for this account (default: the load's workersPerAccount; 0: the test sends its requests itself). */
  workers?: number;
}

/** Registers one user per spec (each its own workspace, starting with the world's opening credit) and an API key of it. */
export async function prepareMoneyAccounts(gatewayUrl: string, specs: Array<{ label: string; capUsd?: string; workers?: number }>): Promise<MoneyAccount[]> {
  const accounts: MoneyAccount[] = [];
  for (const spec of specs) {
    const user = await registerUser(gatewayUrl, `money-${spec.label}`);
    const key = await createKey(gatewayUrl, user.accessToken, `money ${spec.label}`, spec.capUsd ? { monthly_spend_cap_usd: spec.capUsd } : {});
    accounts.push({ label: spec.label, token: user.accessToken, workspaceId: user.workspaceId, ...key, capUsd: spec.capUsd, workers: spec.workers });
  }
  return accounts;
}

/**
 * How one request ended. `ok`: answered in full with its `service` facts (a stream: its last chunk
 * and [DONE]). `refused`: 402, the budget's refusal before the upstream. `unavailable`: 503 with
 * Retry-After. `cut`: a stream whose headers came but whose end did not (its data plane died).
 * `bad`: anything else (another status, a 503 without Retry-After, an error event in a stream, no
 * answer within the deadline, a reset before any header).
 */
export type MoneyOutcome = 'ok' | 'refused' | 'unavailable' | 'cut' | 'bad';

export interface MoneyAttempt {
  account: string;
  stream: boolean;
  /** Date.now() when it was sent. */
  at: number;
  ms: number;
  outcome: MoneyOutcome;
  /** X-Service-Generation-Id, when the answer had one. */
  generationId?: string;
  /** The cost answered (`service.cost_usd`), for `ok`. */
  costUsd?: string;
  /** The error code of a refusal or of a bad answer. */
  code?: string;
  detail?: string;
}

export interface MoneyLoadOptions {
  /** Requests in flight per account (each worker sends one after another). */
  workersPerAccount: number;
  /** Requests started per second per worker at most. */
  ratePerWorker: number;
  /** max_tokens of every request. */
  maxTokens: number;
  /** No answer (or no end of a stream) within this: `bad`. */
  deadlineMs: number;
}

export const defaultMoneyLoadOptions: MoneyLoadOptions = { workersPerAccount: 2, ratePerWorker: 3, maxTokens: 50, deadlineMs: 20_000 };

/** The body of the load's requests (the chaos catalog's passthrough model), the same for every account. */
export function moneyRequestBody(maxTokens: number, stream: boolean): string {
  return JSON.stringify({ model: chaosModel, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: maxTokens, ...(stream ? { stream: true } : {}) });
}

/** One chat completion through the gateway (moneyRequestBody), read to its end, classified. */
export async function sendCompletion(
  gatewayUrl: string,
  fullKey: string,
  request: { maxTokens: number; stream: boolean },
  deadlineMs: number,
): Promise<Omit<MoneyAttempt, 'account' | 'at' | 'ms'>> {
  const { stream } = request;
  const body = moneyRequestBody(request.maxTokens, stream);
  let response: Response;
  try {
    response = await fetch(`${gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fullKey}`, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(deadlineMs),
    });
  } catch (err) {
    return { stream, outcome: 'bad', detail: `no answer: ${describe(err)}` };
  }
  const generationId = response.headers.get('x-service-generation-id') ?? undefined;
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    // The headers came, the end did not.
    return { stream, outcome: response.status === 200 && stream ? 'cut' : 'bad', generationId, detail: describe(err) };
  }
  if (response.status === 402) {
    const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
    const known = code === 'spend_cap_exceeded' || code === 'insufficient_balance';
    return { stream, outcome: known ? 'refused' : 'bad', code, detail: known ? undefined : text.slice(0, 300) };
  }
  if (response.status === 503 && response.headers.get('retry-after')) return { stream, outcome: 'unavailable' };
  if (response.status !== 200) return { stream, outcome: 'bad', code: String(response.status), detail: text.slice(0, 300) };
  const service = stream ? lastServiceOfStream(text) : (JSON.parse(text) as { service?: { generation_id?: string; cost_usd?: string } }).service;
  if (stream && !text.trimEnd().endsWith('data: [DONE]')) {
    // Ended without [DONE]: cut (the data plane went away), unless it carried an error event.
    return { stream, outcome: text.includes('"error"') ? 'bad' : 'cut', generationId, detail: text.slice(-300) };
  }
  if (!service?.generation_id || service.cost_usd === undefined || service.generation_id !== generationId) {
    return { stream, outcome: 'bad', generationId, detail: `no service facts: ${text.slice(-300)}` };
  }
  return { stream, outcome: 'ok', generationId, costUsd: service.cost_usd };
}

function lastServiceOfStream(text: string): { generation_id?: string; cost_usd?: string } | undefined {
  let service: { generation_id?: string; cost_usd?: string } | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    try {
      const chunk = JSON.parse(line.slice(6)) as { service?: { generation_id?: string; cost_usd?: string } };
      if (chunk.service) service = chunk.service;
    } catch {
      // not JSON: nothing to learn
    }
  }
  return service;
}

function describe(err: unknown): string {
  const error = err as Error & { cause?: { code?: string; message?: string } };
  return `${error.name}: ${error.cause?.code ?? ''} ${error.cause?.message ?? error.message}`.trim();
}

/** The load: every account's workers send requests, streamed and not in turn, until stopped. */
export class MoneyLoad {
  readonly attempts: MoneyAttempt[] = [];
  private running = false;
  private workers: Promise<void>[] = [];
  private streaming = 0;

  constructor(
    private readonly gatewayUrl: string,
    readonly accounts: MoneyAccount[],
    private readonly options: MoneyLoadOptions = defaultMoneyLoadOptions,
  ) {}

  start(): void {
    this.running = true;
    this.workers = this.accounts.flatMap((account) =>
      Array.from({ length: account.workers ?? this.options.workersPerAccount }, (_, worker) => this.work(account, worker)),
    );
  }

  /** A request of `account` sent outside the workers (by the test itself), kept with the others for the invariants. */
  record(attempt: MoneyAttempt): void {
    this.attempts.push(attempt);
  }

  /** Stops sending and waits for the requests under way. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.workers);
  }

  /** Streams under way now (their headers may not have come yet). */
  get streamsInFlight(): number {
    return this.streaming;
  }

  /** How many requests of `account` sent at `since` (Date.now()) or later were refused with a 402 so far. */
  refusals(account: MoneyAccount, since = 0): number {
    return this.attempts.filter((attempt) => attempt.account === account.label && attempt.outcome === 'refused' && attempt.at >= since).length;
  }

  private async work(account: MoneyAccount, worker: number): Promise<void> {
    const gapMs = 1000 / this.options.ratePerWorker;
    for (let n = 0; this.running; n++) {
      const began = performance.now();
      const stream = (n + worker) % 2 === 1;
      const at = Date.now();
      if (stream) this.streaming++;
      const result = await sendCompletion(this.gatewayUrl, account.fullKey, { maxTokens: this.options.maxTokens, stream }, this.options.deadlineMs);
      if (stream) this.streaming--;
      this.attempts.push({ account: account.label, at, ms: Date.now() - at, ...result });
      const wait = gapMs - (performance.now() - began);
      if (wait > 0 && this.running) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

export interface MoneyInvariantOptions {
  /** The credit every workspace of the run started with. */
  openingCreditUsd: string;
  /** How long usage and spend may take to settle after the load stopped. */
  settleMs: number;
  /** Date.now() intervals during which a data plane was killed: a stream under way then may be cut. */
  cutWindows: Array<[number, number]>;
}

/**
 * The money invariants after a run, from what the load was told and what billing and keys hold
 * (billing.usage_records and billing.accounts in Postgres, each key's spend over REST).
 */
export async function checkMoneyInvariants(world: ChaosWorld, load: MoneyLoad, options: MoneyInvariantOptions): Promise<InvariantResult[]> {
  const db = new pg.Client({ connectionString: world.postgres.url });
  await db.connect();
  try {
    const results: InvariantResult[] = [answeredCleanly(load, options.cutWindows)];
    results.push(await usageOnce(db, load, options));
    results.push(await balancesInStep(db, load, options.openingCreditUsd));
    results.push(await spendInStep(db, world, load, options.settleMs));
    results.push(await capsHeld(db, load));
    return results;
  } finally {
    await db.end();
  }
}

/** Whether `attempt` was under way during one of `windows` (Date.now() intervals). */
export const overlapsWindows = (attempt: MoneyAttempt, windows: Array<[number, number]>) =>
  windows.some(([from, to]) => attempt.at <= to && attempt.at + attempt.ms >= from);

function answeredCleanly(load: MoneyLoad, cutWindows: Array<[number, number]>): InvariantResult {
  const bad = load.attempts.filter((attempt) => attempt.outcome === 'bad' || (attempt.outcome === 'cut' && !overlapsWindows(attempt, cutWindows)));
  const counts: Record<string, number> = {};
  for (const attempt of load.attempts) counts[attempt.outcome] = (counts[attempt.outcome] ?? 0) + 1;
  return {
    name: 'every request answered: in full, 402 before the upstream, or 503 + Retry-After (a stream cut only by a killed data plane)',
    holds: bad.length === 0,
    detail: bad.length
      ? `${bad.length} bad, e.g. ${bad
          .slice(0, 3)
          .map((a) => `${a.account} ${a.stream ? 'stream' : 'json'} ${a.outcome} ${a.code ?? ''} ${a.detail ?? ''}`)
          .join(' | ')}`
      : JSON.stringify(counts),
  };
}

interface UsageRow {
  generation_id: string;
  workspace_id: string;
  key_id: string;
  cost_usd: string;
}

async function usageRows(db: pg.Client, load: MoneyLoad): Promise<UsageRow[]> {
  const { rows } = await db.query<UsageRow>(
    'SELECT generation_id, workspace_id, key_id, cost_usd::text AS cost_usd FROM billing.usage_records WHERE workspace_id = ANY($1)',
    [load.accounts.map((account) => account.workspaceId)],
  );
  return rows;
}

/**
 * Every generation answered in full has its usage row, once, at the cost it answered; any other row
 * belongs to a request a killed data plane cut (a stream whose end never came, or an answer lost
 * with the process after its usage was kept).
 */
async function usageOnce(db: pg.Client, load: MoneyLoad, options: MoneyInvariantOptions): Promise<InvariantResult> {
  const answered = new Map(load.attempts.flatMap((attempt) => (attempt.outcome === 'ok' ? [[attempt.generationId!, attempt.costUsd!] as const] : [])));
  const missing = (rows: UsageRow[]) => {
    const billed = new Map(rows.map((row) => [row.generation_id, row.cost_usd]));
    return [...answered].filter(([id, cost]) => billed.get(id) === undefined || !new Money(billed.get(id)!).eq(cost));
  };
  let rows = await usageRows(db, load);
  await eventually(
    async () => {
      rows = await usageRows(db, load);
      return missing(rows).length === 0;
    },
    'every answered usage to be recorded',
    options.settleMs,
    200,
  ).catch(() => undefined);
  const left = missing(rows);
  const cutIds = new Set(load.attempts.flatMap((attempt) => (attempt.outcome === 'cut' && attempt.generationId ? [attempt.generationId] : [])));
  const lostAnswers = load.attempts.filter((attempt) => attempt.outcome === 'unavailable' && overlapsWindows(attempt, options.cutWindows)).length;
  const others = rows.filter((row) => !answered.has(row.generation_id));
  const unexplained = others.filter((row) => !cutIds.has(row.generation_id));
  const holds = left.length === 0 && unexplained.length <= lostAnswers;
  return {
    name: 'no lost usage: every answered generation billed once, at the cost it answered; no other usage but of cut requests',
    holds,
    detail: `${answered.size} answered, ${left.length} missing or at another cost${left.length ? ` (e.g. ${left[0][0]})` : ''}; ${others.length} rows of requests not answered in full (${cutIds.size} cut streams, ${unexplained.length} others, at most ${lostAnswers} allowed)`,
  };
}

/** Balance = opening credit − Σ usage for every workspace, exactly (a double debit breaks it), and never below zero. */
async function balancesInStep(db: pg.Client, load: MoneyLoad, openingCreditUsd: string): Promise<InvariantResult> {
  const { rows } = await db.query<{ workspace_id: string; balance: string; expected: string; rows: number; generations: number }>(
    `SELECT a.workspace_id, a.balance_usd::text AS balance, ($1::numeric - u.sum)::text AS expected, u.rows, u.generations
       FROM billing.accounts a,
            LATERAL (SELECT count(*)::int AS rows, count(DISTINCT generation_id)::int AS generations, COALESCE(sum(cost_usd), 0) AS sum
                       FROM billing.usage_records WHERE workspace_id = a.workspace_id) u
      WHERE a.workspace_id = ANY($2)`,
    [openingCreditUsd, load.accounts.map((account) => account.workspaceId)],
  );
  const wrong = load.accounts.filter((account) => {
    const row = rows.find((r) => r.workspace_id === account.workspaceId);
    return !row || !new Money(row.balance).eq(row.expected) || new Money(row.balance).lt(0) || row.rows !== row.generations;
  });
  return {
    name: 'no double charge, no overdraft: balance = opening credit − Σ usage ≥ 0, one row per generation',
    holds: wrong.length === 0,
    detail: load.accounts
      .map((account) => {
        const row = rows.find((r) => r.workspace_id === account.workspaceId);
        return row ? `${account.label} ${row.balance} (expected ${row.expected}, ${row.rows} rows)` : `${account.label}: no account`;
      })
      .join('; '),
  };
}

/** Each key's month-to-date spend (keys, from the usage events, in batches) reaches Σ usage of the key, exactly. */
async function spendInStep(db: pg.Client, world: ChaosWorld, load: MoneyLoad, settleMs: number): Promise<InvariantResult> {
  const state = new Map<string, string>();
  const inStep = async () => {
    const rows = await usageRows(db, load);
    let all = true;
    for (const account of load.accounts) {
      const response = await fetch(`${world.mesh.gatewayUrl}/v1/keys/${account.keyId}`, {
        headers: { authorization: `Bearer ${account.token}` },
        signal: AbortSignal.timeout(5000),
      });
      const spend = ((await response.json()) as { month_to_date_spend_usd?: string }).month_to_date_spend_usd;
      const expected = rows.filter((row) => row.key_id === account.keyId).reduce((total, row) => total.plus(row.cost_usd), new Money(0));
      state.set(account.label, `${spend ?? `HTTP ${response.status}`} (Σ usage ${expected.toFixed()})`);
      if (spend === undefined || !new Money(spend).eq(expected)) all = false;
    }
    return all;
  };
  const holds = await eventually(inStep, "every key's spend to reach its usage", settleMs, 250).then(
    () => true,
    () => false,
  );
  return {
    name: "no lost or repeated event: each key's spend = Σ its usage",
    holds,
    detail: [...state].map(([label, text]) => `${label} ${text}`).join('; '),
  };
}

/** No key's usage passed its cap. */
async function capsHeld(db: pg.Client, load: MoneyLoad): Promise<InvariantResult> {
  const rows = await usageRows(db, load);
  const capped = load.accounts.filter((account) => account.capUsd !== undefined);
  const sums = capped.map((account) => ({
    account,
    spent: rows.filter((row) => row.key_id === account.keyId).reduce((total, row) => total.plus(row.cost_usd), new Money(0)),
  }));
  const passed = sums.filter(({ account, spent }) => spent.gt(account.capUsd!));
  return {
    name: 'no cap passed: Σ usage of each capped key ≤ its cap',
    holds: passed.length === 0,
    detail: sums.map(({ account, spent }) => `${account.label} ${spent.toFixed()} of ${account.capUsd}`).join('; '),
  };
}
