import { errorMessage, type Logger } from '@switchboard/runtime/log';
import { formatMoney, Money } from '@switchboard/runtime/money';
import { startPeriodic } from '@switchboard/runtime/periodic';

/**
 * This replica's leases on budgets owned elsewhere (docs/money-path.md#leases): the keys service's
 * key and workspace budgets and a key's rate limits (amounts in whole requests, tokens or slots
 * there), and billing's prepaid balances. A request reserves its upper-bound estimate against the
 * lease of each budget it spends from, with no call; the reservation is settled at the actual cost
 * when the request ends. The owner keeps, atomically, what it has granted within the budget, so no
 * number of replicas can pass a cap or take a balance below zero.
 *
 * A lease is asked for when a request finds none or too little in it (one call per budget, shared
 * by every request waiting for it), renewed in the background before it runs low or expires, and
 * given back when idle. Its size follows the recent spend (a replica under steady load renews
 * rarely), and the owner shares what is left among the leases (so when little is left, a lease
 * covers one request).
 *
 * Invariant kept here: `used` (settled costs + reservations in flight) never exceeds `granted`,
 * and a renewal never lowers `granted` (it claims all of it): a lease shrinks only when given back.
 */

/** What an owner answers to a grant or renewal. */
export interface LeaseAnswer<Facts> {
  /** Empty when nothing was granted and no lease exists, or when the budget needs no lease. */
  leaseId: string;
  grantedUsd: string;
  expiresAt: Date;
  /** No lease is needed: the budget is unlimited (a key without a cap). */
  unlimited?: boolean;
  /** The owner refuses the subject itself (a key revoked or unknown there). */
  refusal?: string;
  /** What a refusal for lack of room reports (the cap and spend, or the balance). */
  facts: Facts;
}

/** An owner of budgets: the keys service (caps) or billing (balances), behind its RPCs. */
export interface LeaseOwner<Facts> {
  lease(subject: string, request: { leaseId: string; usedUsd: string; wantUsd: string; minUsd: string }): Promise<LeaseAnswer<Facts>>;
  release(leaseId: string, usedUsd: string): Promise<void>;
}

export type Reservation<Facts = unknown> = {
  readonly ok: true;
  /** The lease the usage record names, so the owner settles it; empty for an unlimited budget. */
  readonly leaseId: string;
  /** What the owner last said about the budget (a balance lease carries the workspace's plan). */
  readonly facts: Facts;
  /** What the lease had left once this was reserved (x-ratelimit-remaining-*); undefined for an unlimited budget. */
  readonly left?: Money;
  /** Ends the reservation at the actual cost (at most once). */
  settle(actual: Money): void;
};

export type Refusal<Facts> = { readonly ok: false; readonly refusal?: string; readonly facts: Facts };

interface Lease<Facts> {
  id: string;
  granted: Money;
  used: Money;
  inFlight: number;
  expiresAt: number;
  /** The lease's lifetime as granted: it is renewed once half of it has passed. */
  ttlMs: number;
  /** used when it was last granted, to size the next grant on the spend since. */
  usedAtGrant: Money;
  /** Past this `used` less than a quarter of the last headroom is left: renewed ahead of exhaustion (computed once per grant). */
  renewAbove: Money;
  grantedAt: number;
  lastUsedAt: number;
  facts: Facts;
  unlimited: boolean;
  /** The owner's last answer granted less than the least asked: it has no room left to share. */
  exhausted: boolean;
  /** An unlimited answer past its trust served because its owner could not be reached: served so at once until it answers again. */
  ownerDownSince?: number;
}

export interface BudgetLeasesDeps<Facts> {
  /** "cap" or "balance": for logs. */
  name: string;
  log: Logger;
  owner: LeaseOwner<Facts>;
  /** A lease is not reserved against in its last stretch (a renewal under way may not make it). */
  expiryMarginMs?: number;
  /** Given back after this long without a request. */
  idleMs?: number;
  /** A lease asks for at least this many estimates of the request that needs it. */
  requestsPerGrant?: number;
  /**
   * Whether a lease is renewed in the background once less than a quarter of its headroom is left
   * (default true). Not for a lease whose use comes back (concurrency slots): renewed ahead, it
   * would grow to a multiple of the peak in use and hold slots other replicas could use; it grows
   * only when a request finds it full.
   */
  renewAhead?: boolean;
  /**
   * How long the owner's last "no limit" keeps serving while the owner cannot be reached (30 s,
   * KEY_STATES_MAX_STALE's default, after which the key replica refuses anyway). A limit is set
   * through the owner, so while it is down no new one can have been set; without this, a keys
   * restart would refuse every request of every unlimited workspace after a second.
   */
  unlimitedWhileOwnerDownMs?: number;
}

const zero = new Money(0);
/** The least a keep-alive renewal asks for: the owner wants a positive amount. */
const keepAliveMin = new Money('0.000000000001');
/**
 * How many grants a request waits for before it is refused though the owner still had room: other
 * requests took each grant's room first. A grant is sized for every request waiting, so a second
 * one is rare and a third rarer; the bound only keeps a request from waiting without end.
 */
const maxGrantRounds = 8;
/** How often leases are looked over (renewed, given back). */
const sweepEveryMs = 500;
/** A burst sizes a grant for at most this many requests waiting: one replica never takes a whole budget other replicas share. */
const maxWaitingPerGrant = 64;

export class BudgetLeases<Facts> {
  private readonly leases = new Map<string, Lease<Facts>>();
  /**
   * The grant under way per subject, shared by every request that needs more room than the lease
   * has (one call per budget). Requests the lease covers never wait for it: a renewal claims all
   * of the grant as used, so whatever they reserve meanwhile stays within what the owner holds.
   */
  private readonly granting = new Map<string, Promise<Lease<Facts> | Refusal<Facts>>>();
  /**
   * Bumped by forget while a grant is under way: a grant asked under an older generation is of
   * limits that changed meanwhile. An entry lives only as long as its subject's grant (bounded).
   */
  private readonly generations = new Map<string, number>();
  /** Requests per subject that its lease could not cover, waiting for a grant: the next grant is sized for them all. */
  private readonly waiting = new Map<string, number>();
  private sweeper?: { stop(): Promise<void> };
  private readonly expiryMarginMs: number;
  private readonly idleMs: number;
  private readonly requestsPerGrant: number;
  private readonly unlimitedWhileOwnerDownMs: number;

  constructor(private readonly deps: BudgetLeasesDeps<Facts>) {
    this.expiryMarginMs = deps.expiryMarginMs ?? 2000;
    this.idleMs = deps.idleMs ?? 60_000;
    this.requestsPerGrant = deps.requestsPerGrant ?? 16;
    this.unlimitedWhileOwnerDownMs = deps.unlimitedWhileOwnerDownMs ?? 30_000;
  }

  start(): void {
    this.sweeper = startPeriodic({ name: `${this.deps.name}-leases`, everyMs: sweepEveryMs, log: this.deps.log, run: () => this.sweep() });
  }

  /** Stops renewing and gives every lease back (what it used stays held until it is settled). */
  async stop(): Promise<void> {
    await this.sweeper?.stop();
    await Promise.allSettled([...this.leases.entries()].map(([subject, lease]) => this.giveBack(subject, lease)));
  }

  /**
   * The budget changed at its owner (a key's cap was lowered): the lease granted under the old
   * limit is given back, and the next request asks for one under the new limit.
   */
  forget(subject: string): void {
    // A grant under way was decided under the old limit: ask() gives it back when it arrives.
    if (this.granting.has(subject)) this.generations.set(subject, (this.generations.get(subject) ?? 0) + 1);
    const lease = this.leases.get(subject);
    if (lease) void this.giveBack(subject, lease);
  }

  /**
   * What the owner says about `subject` (a balance lease carries the workspace's plan): the live
   * lease's facts, else those of a grant of the least amount, shared with any request asking.
   */
  async facts(subject: string): Promise<Facts> {
    const lease = this.leases.get(subject);
    if (lease && lease.expiresAt > Date.now()) return lease.facts;
    return (await this.grant(subject, zero)).facts;
  }

  /** The facts of the live lease of `subject` and what it has left, without reserving or asking; undefined without one. */
  peek(subject: string): { facts: Facts; left?: Money } | undefined {
    const lease = this.leases.get(subject);
    if (!lease || lease.expiresAt <= Date.now()) return undefined;
    return { facts: lease.facts, left: lease.unlimited ? undefined : lease.granted.minus(lease.used) };
  }

  /** Reserves `amount` against the lease of `subject`, asking the owner when the lease cannot cover it. */
  async reserve(subject: string, amount: Money): Promise<Reservation<Facts> | Refusal<Facts>> {
    let refusal: Refusal<Facts> | undefined;
    let waiting = false;
    try {
      for (let round = 0; round < maxGrantRounds; round++) {
        const lease = this.leases.get(subject);
        // A renewal under way never holds up a request the lease covers (it claims all of the grant: see ask).
        if (lease && this.covers(lease, amount, Date.now())) return this.take(subject, lease, amount);
        // The owner is known to be away: no request waits out a call's timeout for it again (the sweep keeps asking).
        if (lease?.ownerDownSince !== undefined && this.servesWhileOwnerDown(lease)) return this.take(subject, lease, amount);
        if (!waiting) {
          waiting = true;
          this.waiting.set(subject, (this.waiting.get(subject) ?? 0) + 1);
        }
        let answer: Lease<Facts> | Refusal<Facts>;
        try {
          answer = await this.grant(subject, amount);
        } catch (err) {
          const last = this.leases.get(subject);
          if (last && this.servesWhileOwnerDown(last)) {
            last.ownerDownSince ??= Date.now();
            return this.take(subject, last, amount);
          }
          throw err;
        }
        if ('ok' in answer) return answer;
        if (this.covers(answer, amount, Date.now())) return this.take(subject, answer, amount);
        refusal = { ok: false, facts: answer.facts };
        // No room left at the owner: refused. Else other requests took the room this grant made
        // before this one got to it (64 in flight against a lease sized for fewer): ask again.
        if (answer.exhausted) break;
      }
    } finally {
      if (waiting) {
        const left = (this.waiting.get(subject) ?? 1) - 1;
        if (left > 0) this.waiting.set(subject, left);
        else this.waiting.delete(subject);
      }
    }
    return refusal!;
  }

  /** An unlimited answer keeps serving for a while after its trust when its owner cannot be reached (see unlimitedWhileOwnerDownMs). */
  private servesWhileOwnerDown(lease: Lease<Facts>): boolean {
    return lease.unlimited && Date.now() - lease.expiresAt < this.unlimitedWhileOwnerDownMs;
  }

  private covers(lease: Lease<Facts>, amount: Money, now: number): boolean {
    if (lease.unlimited) return lease.expiresAt > now;
    // The margin is at most a quarter of the lease's life: a short LEASE_TTL still leaves most of it usable.
    const margin = Math.min(this.expiryMarginMs, lease.ttlMs / 4);
    return lease.expiresAt - margin > now && lease.granted.minus(lease.used).gte(amount);
  }

  private take(subject: string, lease: Lease<Facts>, amount: Money): Reservation<Facts> {
    const held = lease.unlimited ? zero : amount;
    lease.used = lease.used.plus(held);
    lease.inFlight += 1;
    lease.lastUsedAt = Date.now();
    // Ahead of exhaustion: renewed in the background once less than a quarter of the grant is left.
    if (!lease.unlimited && this.deps.renewAhead !== false && lease.used.gt(lease.renewAbove)) this.renewInBackground(subject, amount);
    let settled = false;
    return {
      ok: true,
      leaseId: lease.unlimited ? '' : lease.id,
      facts: lease.facts,
      left: lease.unlimited ? undefined : lease.granted.minus(lease.used),
      settle: (actual: Money) => {
        if (settled) return;
        settled = true;
        lease.inFlight -= 1;
        if (lease.unlimited) return;
        if (actual.gt(held))
          this.deps.log.warn({ lease_id: lease.id, reserved: formatMoney(held), actual: formatMoney(actual) }, 'a request cost more than its estimate');
        lease.used = lease.used.minus(held).plus(actual);
      },
    };
  }

  private renewInBackground(subject: string, amount: Money): void {
    if (this.granting.has(subject)) return;
    this.grant(subject, amount).catch((err) => this.deps.log.warn({ err: errorMessage(err), subject }, `could not renew a ${this.deps.name} lease`));
  }

  /** One grant per subject at a time, shared by every request waiting for it. */
  private grant(subject: string, amount: Money, keepAlive = false): Promise<Lease<Facts> | Refusal<Facts>> {
    let pending = this.granting.get(subject);
    if (!pending) {
      pending = this.ask(subject, amount, keepAlive).finally(() => {
        this.granting.delete(subject);
        this.generations.delete(subject);
      });
      this.granting.set(subject, pending);
    }
    return pending;
  }

  /**
   * Asks the owner for (more of) the subject's lease: a renewal while it lives, else a new one.
   * `keepAlive` (leases that never renew ahead: concurrency slots) renews a live lease for its
   * time only, asking for nothing more: renewed with a margin each time, it would grow to a
   * multiple of the slots in use and starve the other replicas.
   */
  private async ask(subject: string, amount: Money, keepAlive = false): Promise<Lease<Facts> | Refusal<Facts>> {
    const now = Date.now();
    const generation = this.generations.get(subject) ?? 0;
    const current = this.leases.get(subject);
    const alive = current && !current.unlimited && current.id && current.expiresAt > now ? current : undefined;
    // Sized on the spend since the last grant (at least a few requests' worth, and one estimate per
    // request waiting for it): a busy replica renews rarely, and a burst is served by one grant.
    const recent = alive ? alive.used.minus(alive.usedAtGrant) : zero;
    const target = Money.max(amount.mul(this.requestsPerGrant), recent.mul(2), amount.mul(Math.min(this.waiting.get(subject) ?? 0, maxWaitingPerGrant)));
    // A renewal claims the whole grant as used: requests keep reserving against it while the call
    // is under way, so the owner must go on holding all of it. It asks for a top-up to the target's
    // free room; what is never used goes back when the lease is given back (idle, or at shutdown).
    const free = alive ? alive.granted.minus(alive.used) : zero;
    const min = alive && keepAlive ? zero : Money.max(amount.minus(free), keepAliveMin);
    const want = alive && keepAlive ? zero : Money.max(target.minus(free), min);
    const answer = await this.deps.owner.lease(subject, {
      leaseId: alive?.id ?? '',
      usedUsd: formatMoney(alive?.granted ?? zero),
      wantUsd: formatMoney(want),
      minUsd: formatMoney(min),
    });
    if ((this.generations.get(subject) ?? 0) !== generation) {
      // The budget changed while the owner answered (forget): this grant may be of the old limit. It
      // goes back, holding only what the requests of the given-back lease used, and the next is asked under the new one.
      if (answer.leaseId && !answer.unlimited) await this.deps.owner.release(answer.leaseId, formatMoney(alive?.used ?? zero)).catch(() => undefined);
      return this.ask(subject, amount);
    }
    if (answer.refusal) return { ok: false, refusal: answer.refusal, facts: answer.facts };
    const renewed = alive && answer.leaseId === alive.id ? alive : undefined;
    const lease: Lease<Facts> = renewed ?? {
      id: answer.leaseId,
      granted: zero,
      used: zero,
      inFlight: 0,
      expiresAt: 0,
      ttlMs: 1,
      usedAtGrant: zero,
      renewAbove: zero,
      grantedAt: now,
      lastUsedAt: now,
      facts: answer.facts,
      unlimited: false,
      exhausted: false,
    };
    // A renewed lease keeps its used and its requests in flight: only settlements ran meanwhile.
    const granted = new Money(answer.grantedUsd || '0');
    lease.exhausted = granted.minus(renewed ? renewed.granted : zero).lt(min);
    lease.granted = granted;
    lease.expiresAt = answer.expiresAt.getTime();
    lease.ttlMs = Math.max(1, lease.expiresAt - now);
    lease.usedAtGrant = lease.used;
    lease.renewAbove = granted.minus(granted.minus(lease.used).div(4));
    lease.grantedAt = now;
    lease.facts = answer.facts;
    lease.unlimited = answer.unlimited ?? false;
    this.leases.set(subject, lease);
    return lease;
  }

  /**
   * Renews leases past half their life that are still in use; gives back the idle ones. An
   * unlimited answer used since it was given is asked again once it would not outlive the next
   * sweep but one (its trust is a second, two sweeps): a busy subject without a limit (most
   * workspaces) never has a request wait for the owner, and the answer is still never older than
   * its trust.
   */
  private async sweep(): Promise<void> {
    const now = Date.now();
    const work: Promise<unknown>[] = [];
    for (const [subject, lease] of this.leases) {
      // An unlimited answer is kept past its trust for when its owner cannot be reached (see unlimitedWhileOwnerDownMs).
      const keptUntil = lease.unlimited ? lease.expiresAt + this.unlimitedWhileOwnerDownMs : lease.expiresAt;
      if (keptUntil <= now && lease.inFlight === 0) {
        this.leases.delete(subject);
        continue;
      }
      if (this.granting.has(subject)) continue;
      if (lease.unlimited) {
        if (lease.lastUsedAt > lease.grantedAt && lease.expiresAt - now <= 2 * sweepEveryMs) work.push(this.renewUnlimited(subject));
        continue;
      }
      if (lease.inFlight === 0 && now - lease.lastUsedAt > this.idleMs) {
        work.push(this.giveBack(subject, lease));
        continue;
      }
      if (now - lease.grantedAt > lease.ttlMs / 2) {
        const typical = lease.granted.minus(lease.usedAtGrant).div(this.requestsPerGrant);
        work.push(
          this.grant(subject, Money.max(typical, keepAliveMin), this.deps.renewAhead === false).catch((err) =>
            this.deps.log.warn({ err: errorMessage(err), subject }, `could not renew a ${this.deps.name} lease`),
          ),
        );
      }
    }
    await Promise.allSettled(work);
  }

  private async renewUnlimited(subject: string): Promise<void> {
    await this.grant(subject, keepAliveMin).catch((err) =>
      this.deps.log.warn({ err: errorMessage(err), subject }, `could not ask for a ${this.deps.name} lease`),
    );
  }

  private async giveBack(subject: string, lease: Lease<Facts>): Promise<void> {
    if (this.leases.get(subject) === lease) this.leases.delete(subject);
    if (lease.unlimited || !lease.id) return;
    await this.deps.owner
      .release(lease.id, formatMoney(lease.used))
      .catch((err) =>
        this.deps.log.warn({ err: errorMessage(err), lease_id: lease.id }, `could not give a ${this.deps.name} lease back; it expires on its own`),
      );
  }
}
