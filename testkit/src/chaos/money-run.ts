import type { Component } from '@switchboard/runtime/dev/mesh';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import pg from 'pg';
import { type Fault, killComponent, restartComponent, restartNats } from './faults.js';
import type { InvariantResult } from './invariants.js';
import { chaosModel } from './mixed-load.js';
import {
  checkMoneyInvariants,
  defaultMoneyLoadOptions,
  type MoneyAccount,
  type MoneyAttempt,
  MoneyLoad,
  moneyRequestBody,
  prepareMoneyAccounts,
  sendCompletion,
} from './money-path.js';
import { formatMoneyChaosReport, type LeaseReturn, type MoneyFaultRow, type MoneyFaultWindow, moneyFaultRows } from './money-report.js';
import { type ChaosWorld, startChaosWorld } from './world.js';

/**
 * The money path's chaos run (docs/money-path.md#faults; docs/operations.md#chaos): the load of
 * money-path.ts from accounts whose budgets run out during the run — two keys with caps, a
 * workspace's prepaid balance — and, under it: the data plane killed with SIGKILL mid-stream
 * while a lease holds all of one key's room, nats-server killed and restarted, billing killed,
 * keys restarted. Then money-path.ts's invariants, the dead replica's leases back after
 * LEASE_TTL, and the budgets used up (not lost to leases that never came back).
 * e2e/platform/money-path-chaos.test.ts runs it briefly, `npm run bench:chaos` at length.
 */

/** The budgets at scale 1: small, so that they run out under the load across the faults. */
const baseBudgets = { openingCreditUsd: '0.01', capLowUsd: '0.002', capUsd: '0.005' };

export interface MoneyChaosWorld extends ChaosWorld {
  leaseTtlMs: number;
  /** Every workspace's opening credit and the two capped keys' caps. */
  budgets: typeof baseBudgets;
  budgetScale: number;
}

/**
 * A chaos world for the money-path run: LEASE_TTL short so that a killed replica's leases come
 * back within the run; budgets `budgetScale` times the base ones (a longer run wants larger
 * ones, to run out across its faults rather than before them); answers of 50 tokens, a stream
 * sending one every 20 ms, so that one is under way for a second.
 */
export async function startMoneyChaosWorld(
  options: {
    leaseTtlMs?: number;
    budgetScale?: number;
    onComponentExit?: (component: Component, code: number | string | null, lastLines: string[]) => void;
  } = {},
): Promise<MoneyChaosWorld> {
  const leaseTtlMs = options.leaseTtlMs ?? 5000;
  const budgetScale = options.budgetScale ?? 1;
  const budgets = Object.fromEntries(
    Object.entries(baseBudgets).map(([name, usd]) => [name, new Money(usd).mul(budgetScale).toDecimalPlaces(6, Money.ROUND_DOWN).toFixed()]),
  ) as typeof baseBudgets;
  const world = await startChaosWorld({
    env: { LEASE_TTL: `${leaseTtlMs}ms` },
    openingCreditUsd: budgets.openingCreditUsd,
    onComponentExit: options.onComponentExit,
  });
  world.upstream.words = 50;
  world.upstream.mode(chaosModel, { kind: 'slow', delayMs: 20 });
  return Object.assign(world, { leaseTtlMs, budgets, budgetScale });
}

export interface MoneyChaosPlan {
  /** Steady load before the first fault and after each. */
  steadyMs: number;
  /** How long each fault but the data plane's kill keeps its target away (the kill lasts until the cut stream has ended). */
  downMs: number;
}

/** The e2e run's plan: the budgets at scale 1 run out across its faults. */
export const briefMoneyChaosPlan: MoneyChaosPlan = { steadyMs: 2000, downMs: 1500 };

export interface MoneyChaosResult {
  rows: MoneyFaultRow[];
  invariants: InvariantResult[];
  attempts: MoneyAttempt[];
  passed: boolean;
  report: string;
}

/** The lease account's service is back within this of its due time (LEASE_TTL after the kill, or the restart if later). */
const leaseSlackMs = 2000;

/** The estimate a request of the load reserves (docs/money-path.md#leases): its body's bytes and max_tokens at the catalog's prices, with the largest markup. */
export function moneyEstimate(maxTokens: number, stream: boolean): Money {
  const bytes = Buffer.byteLength(moneyRequestBody(maxTokens, stream));
  // The chaos catalog's model: 1.00 input / 2.00 output per 1M; the largest passthrough markup of the pricing file is 5 %.
  return new Money(bytes).mul('1.00').plus(new Money(maxTokens).mul('2.00')).mul('1.05').div(1_000_000);
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the money-path load on `world` under the faults one after another, then checks the invariants. */
export async function runMoneyChaos(world: MoneyChaosWorld, plan: MoneyChaosPlan): Promise<MoneyChaosResult> {
  const { maxTokens } = defaultMoneyLoadOptions;
  const streamEstimate = moneyEstimate(maxTokens, true);
  const accounts = await prepareMoneyAccounts(world.mesh.gatewayUrl, [
    { label: 'cap-low', capUsd: world.budgets.capLowUsd },
    { label: 'cap', capUsd: world.budgets.capUsd },
    { label: 'balance' },
    // Room for one stream (1.5 estimates): the lease the killed data plane holds is all of it.
    { label: 'lease', capUsd: streamEstimate.mul('1.5').toDecimalPlaces(12, Money.ROUND_DOWN).toFixed(), workers: 0 },
  ]);
  const lease = accounts.find((account) => account.label === 'lease')!;
  const budgets = accounts.filter((account) => account !== lease);
  const load = new MoneyLoad(world.mesh.gatewayUrl, accounts);
  const windows: MoneyFaultWindow[] = [];
  const cutWindows: Array<[number, number]> = [];
  const loadStartedAt = Date.now();
  load.start();
  try {
    await pause(plan.steadyMs);
    const kill = await killDataPlaneMidStream(world, load, lease);
    cutWindows.push([kill.injectedAt, kill.restoredAt]);
    const leaseBack = await leaseReturn(world, load, lease, kill);
    await pause(plan.steadyMs);
    windows.push({ ...kill, endAt: Date.now(), lease: leaseBack });
    for (const fault of [restartNats, killComponent('billing'), restartComponent('keys')]) windows.push(await underLoad(world, fault, plan));
    // The load goes on until every budget has run out (refused after the faults), so the caps and the balance were reached.
    const faultsDoneAt = Date.now();
    await eventually(() => budgets.every((account) => load.refusals(account, faultsDoneAt) > 0), 'every budget to run out', 90_000 * world.budgetScale, 250);
  } finally {
    await load.stop();
  }
  const invariants = await checkMoneyInvariants(world, load, { openingCreditUsd: world.openingCreditUsd, settleMs: 30_000, cutWindows });
  const rows = moneyFaultRows(windows, load.attempts, { loadStartedAt, cutWindows });
  const back = windows[0].lease!;
  invariants.push({
    name: `a killed replica's leases come back after LEASE_TTL (or its restart): the key they held served within ${leaseSlackMs / 1000} s of that`,
    holds: back.onTime,
    detail: `served ${back.backMs ?? 'never'} ms after the kill, due ${back.dueMs} ms; ${back.refusals} 402s meanwhile`,
  });
  invariants.push(await budgetsUsedUp(world, budgets, streamEstimate.mul(defaultMoneyLoadOptions.workersPerAccount + 1)));
  const passed = rows.every((row) => row.holds) && invariants.every((invariant) => invariant.holds);
  return { rows, invariants, attempts: load.attempts, passed, report: formatMoneyChaosReport(rows, invariants, load.attempts) };
}

/** Injects `fault`, keeps it for `downMs`, restores it, then the steady load. */
async function underLoad(world: ChaosWorld, fault: Fault, plan: MoneyChaosPlan): Promise<MoneyFaultWindow> {
  const injectedAt = Date.now();
  await fault.inject(world);
  await pause(plan.downMs);
  await fault.restore(world);
  const restoredAt = Date.now();
  await pause(plan.steadyMs);
  return { fault: fault.name, injectedAt, restoredAt, endAt: Date.now() };
}

/**
 * kill -9 of the data plane while streams of the load are under way and one stream of the lease
 * account holds its whole cap; started again once that stream has ended (cut, without [DONE]).
 */
async function killDataPlaneMidStream(world: ChaosWorld, load: MoneyLoad, lease: MoneyAccount): Promise<Omit<MoneyFaultWindow, 'endAt'>> {
  const { maxTokens } = defaultMoneyLoadOptions;
  await eventually(() => load.streamsInFlight > 0, 'a stream of the load under way');
  const sentAt = Date.now();
  const response = await fetch(`${world.mesh.gatewayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${lease.fullKey}`, 'content-type': 'application/json' },
    body: moneyRequestBody(maxTokens, true),
  });
  if (response.status !== 200) throw new Error(`the lease account's stream: HTTP ${response.status} ${await response.text()}`);
  const reader = response.body!.getReader();
  if ((await reader.read()).done) throw new Error("the lease account's stream ended before its first chunk");
  const fault = killComponent('data-plane');
  const injectedAt = Date.now();
  await fault.inject(world);
  let streamEnd = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      streamEnd = Buffer.from(value).toString('utf8');
    }
  } catch {
    // cut: the end never came
  }
  // Ended in full: the kill came too late to hold a lease, and the run would prove nothing of leases.
  if (streamEnd.includes('[DONE]')) throw new Error("the lease account's stream ended in full although the data plane was killed under it");
  load.record({
    account: lease.label,
    stream: true,
    at: sentAt,
    ms: Date.now() - sentAt,
    outcome: 'cut',
    generationId: response.headers.get('x-service-generation-id') ?? undefined,
  });
  await fault.restore(world);
  return { fault: 'kill -9 data-plane mid-stream, leases held', injectedAt, restoredAt: Date.now() };
}

/** Requests of the lease account, one after another, until one is served: its cap comes back once the dead replica's lease lapses. */
async function leaseReturn(
  world: MoneyChaosWorld,
  load: MoneyLoad,
  lease: MoneyAccount,
  kill: { injectedAt: number; restoredAt: number },
): Promise<LeaseReturn> {
  let refusals = 0;
  const servedAt = await eventually(
    async () => {
      const at = Date.now();
      const result = await sendCompletion(world.mesh.gatewayUrl, lease.fullKey, { maxTokens: defaultMoneyLoadOptions.maxTokens, stream: false }, 10_000);
      load.record({ account: lease.label, at, ms: Date.now() - at, ...result });
      if (result.outcome === 'refused') refusals++;
      if (result.outcome === 'bad') throw new Error(`lease account: ${result.code} ${result.detail}`);
      return result.outcome === 'ok' && Date.now();
    },
    "the killed replica's lease to come back",
    world.leaseTtlMs + 15_000,
    100,
  ).catch(() => undefined);
  const dueMs = Math.max(kill.restoredAt, kill.injectedAt + world.leaseTtlMs) - kill.injectedAt;
  const backMs = servedAt === undefined ? undefined : servedAt - kill.injectedAt;
  return { backMs, refusals, dueMs, onTime: backMs !== undefined && backMs < dueMs + leaseSlackMs };
}

/**
 * The budgets were used up, not lost to leases that never came back: what is left of each is
 * less than `bound` (the estimates its requests in flight could hold when it was refused, and one more).
 */
async function budgetsUsedUp(world: ChaosWorld, accounts: MoneyAccount[], bound: Money): Promise<InvariantResult> {
  const db = new pg.Client({ connectionString: world.postgres.url });
  await db.connect();
  try {
    const left: Array<{ label: string; left: Money }> = [];
    for (const account of accounts) {
      const { rows } = await db.query<{ spent: string; balance: string }>(
        `SELECT (SELECT COALESCE(sum(cost_usd), 0)::text FROM billing.usage_records WHERE key_id = $1) AS spent,
                (SELECT balance_usd::text FROM billing.accounts WHERE workspace_id = $2) AS balance`,
        [account.keyId, account.workspaceId],
      );
      left.push({ label: account.label, left: account.capUsd ? new Money(account.capUsd).minus(rows[0].spent) : new Money(rows[0].balance) });
    }
    return {
      name: `budgets used up, none held by a lease for good: each has less than ${bound.toFixed()} left (its workers' estimates and one more)`,
      holds: left.every((account) => account.left.lt(bound)),
      detail: left.map((account) => `${account.label} ${account.left.toFixed()} left`).join('; '),
    };
  } finally {
    await db.end();
  }
}
