import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { type KV, type KvEntry, Kvm } from '@nats-io/kv';
import { ApiError } from '@switchboard/runtime/api-error';
import { catalogued, errorCatalogue } from '@switchboard/runtime/error-catalogue';
import type { Logger } from '@switchboard/runtime/log';
import type { NatsConnection } from '@switchboard/runtime/nats';
import { InputError } from './codec.js';

/** How long a key's result is kept (docs/conventions.md#idempotency): the bucket's TTL. */
const keptMs = 24 * 3600_000;
/** The header's rule (docs/conventions.md#idempotency), the same as PublishEvent's `idempotency_key`. */
const keyPattern = /^[\x20-\x7e]{1,255}$/;
/** The largest answer body kept for replays (docs/conventions.md#idempotency): far above any POST's record. */
export const maxKeptBodyBytes = 256 * 1024;
/** How long one NATS operation may take before the request is answered 503 (never a hang). */
const natsTimeoutMs = 2000;
/**
 * How far a claim outlives the deadline of its call before it is taken over: room to keep the
 * answer (a NATS write of up to natsTimeoutMs) and for a clock skew between replicas.
 */
const takeoverMarginMs = 5000;

/**
 * The takeover delay of a claim (docs/conventions.md#idempotency): the deadline of the call it
 * guards plus the margin, so a live first request is never run twice.
 */
export function takeoverDelayOf(callTimeoutMs: number): number {
  return callTimeoutMs + takeoverMarginMs;
}

/**
 * Headers of an answer that a replay repeats: what the body is, where a created thing is, how it
 * may be cached and shown. Never Set-Cookie (a replay signs nobody in again).
 */
const replayedHeaders = new Set(['content-type', 'location', 'cache-control', 'content-security-policy']);

/** A REST answer, as the client gets it and as a replay gives it back. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** One request that carries an Idempotency-Key. */
export interface IdempotentRequest {
  /** The header's value, checked by idempotencyKeyOf. */
  key: string;
  /** Whose key it is: the principal and workspace, or the client address (docs/conventions.md#idempotency). */
  scope: string;
  /** The route's method and template (POST /v1/keys/{key_id}/rotate), for the logs: a key is not per route. */
  route: string;
  /**
   * What the fingerprint covers: the path as sent, the query and the body's bytes. Only POSTs carry
   * a key, so the path names the route, and the same key on another route is a 422.
   */
  path: string;
  query: string;
  body: Buffer | undefined;
  /** The request id of this request: an error body replayed names it, as every error body does. */
  requestId: string;
}

/** What the bucket holds under a key: a claim while the first request runs, then its answer. */
interface StoredRecord {
  v: 1;
  state: 'running' | 'done';
  /**
   * Which SWITCHBOARD_IDEMPOTENCY_SECRET made the record (secretIdOf); none on a record made
   * before the secret existed. A record of another secret can be neither checked nor opened.
   */
  kid?: string;
  /** Keyed fingerprint of the request (HMAC under a key derived from the idempotency secret and the Idempotency-Key). */
  fp: string;
  /** The answer, AES-256-GCM sealed (iv | ciphertext | tag, base64url); null when it was too large to keep. */
  answer?: string | null;
}

/**
 * The Idempotency-Key header of a POST: undefined without one, a 400 naming the header when it is
 * not 1..255 printable ASCII characters.
 */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !keyPattern.test(header))
    throw new InputError('Idempotency-Key', 'The Idempotency-Key header must be 1 to 255 printable ASCII characters.');
  return header;
}

export interface IdempotencyOptions {
  /** The gateway's NATS connection (a promise while NATS has not been reached yet). */
  nats: Promise<NatsConnection>;
  /** The KV bucket (one per namespace). */
  bucket: string;
  /**
   * SWITCHBOARD_IDEMPOTENCY_SECRET: the fingerprints and the answers' keys are derived from it.
   * A secret of its own, never the mesh secret, which only signs internal tokens, nor the data
   * keys, which the gateway never holds (docs/conventions.md#idempotency). There is no previous
   * one: after a rotation, an answer kept under the old secret is a 409, like one too large to keep.
   */
  secret: string;
  log: Logger;
  /**
   * How long a claim may stay without an answer before another request takes it over: the claim
   * of a replica that died mid-call. takeoverDelayOf(the call deadline); a test's may be shorter.
   */
  takeoverAfterMs: number;
}

/**
 * Idempotency-Key of the REST surface (docs/conventions.md#idempotency): the first request with
 * a key claims it in a JetStream KV bucket (a write that expects the entry's revision, so one
 * writer wins whichever replica it reaches), runs, and leaves its answer there for 24 h; every
 * other request with the key, concurrent or later, on any replica, waits for that answer and
 * replays it.
 */
export class IdempotencyStore {
  private nc?: NatsConnection;
  private connected = false;
  private kv?: Promise<KV>;
  private readonly secretId: string;

  constructor(private readonly options: IdempotencyOptions) {
    this.secretId = secretIdOf(options.secret);
    options.nats.then(
      (nc) => {
        this.nc = nc;
        this.connected = !nc.isClosed();
        void this.followConnection(nc);
      },
      () => undefined,
    );
  }

  /**
   * Runs `execute` at most once for the key of `request` and gives its answer (replayed: false),
   * or the answer of the request that ran first (replayed: true). Answers of 5xx and 429 are not
   * kept: the key is released and a retry runs again. Without NATS: 503, never unprotected.
   */
  async run(request: IdempotentRequest, execute: () => Promise<Answer>, signal: AbortSignal): Promise<{ answer: Answer; replayed: boolean }> {
    const kv = await this.bucket();
    // docs/conventions.md#idempotency: a key belongs to its scope, whatever the route; the fingerprint tells requests apart.
    const storeKey = createHash('sha256').update(`${request.scope}\n${request.key}`).digest('hex');
    const digest = createHash('sha256')
      .update(`${request.path}?${request.query}\n`)
      .update(request.body ?? Buffer.alloc(0))
      .digest('hex');
    const keys = recordKeys(this.options.secret, storeKey, request.key);
    const fp = fingerprintOf(keys, digest);
    const claim = encode({ v: 1, state: 'running', kid: this.secretId, fp });
    let seen: { revision: number; at: number } | undefined;
    let pollMs = 10;
    // Never a hang: past the takeover delay (and a margin), something is wrong with the store.
    const giveUpAt = Date.now() + 2 * this.options.takeoverAfterMs;
    while (Date.now() < giveUpAt) {
      // A put expecting no entry yet (kv.create would read the entry again on a refusal, which costs a replay one more round trip).
      const claimed = await this.nats(() => kv.put(storeKey, claim, { previousSeq: 0 }).catch(unlessTaken));
      if (claimed !== undefined) return { answer: await this.runClaimed(kv, storeKey, claimed, keys, fp, request, execute), replayed: false };
      const entry = await this.nats(() => kv.get(storeKey));
      // Expired between the two calls: claim it again.
      if (!entry) continue;
      if (entry.operation !== 'PUT') {
        // Released by a request whose answer was not kept: claimed on the release's revision, by one writer.
        const reclaimed = await this.nats(() => kv.update(storeKey, claim, entry.revision).catch(unlessTaken));
        if (reclaimed !== undefined) return { answer: await this.runClaimed(kv, storeKey, reclaimed, keys, fp, request, execute), replayed: false };
        continue;
      }
      const record = decode(entry);
      // docs/conventions.md#idempotency: a record made under another idempotency secret (before a
      // rotation, or by a replica not rolled yet) has a fingerprint that cannot be checked here, and
      // an answer that does not open (replay answers it 409, never a second run).
      if (record.kid === this.secretId && record.fp !== fp) throw catalogued(errorCatalogue.idempotencyKeyReused, { field: 'Idempotency-Key' });
      if (record.state === 'done') return { answer: this.replay(record, keys, storeKey, request), replayed: true };
      // docs/conventions.md#idempotency: a claim whose request has not answered after the takeover delay
      // is a replica that died mid-call. The delay counts from the claim (the server's clock), or from
      // when this request first saw it if that is earlier (a waiter never waits longer than the delay);
      // a clock skew below the delay's margin over the call deadline never takes over a live claim.
      const now = Date.now();
      if (seen?.revision !== entry.revision) seen = { revision: entry.revision, at: now };
      if (now >= Math.min(entry.created.getTime(), seen.at) + this.options.takeoverAfterMs) {
        const taken = await this.nats(() => kv.update(storeKey, claim, entry.revision).catch(unlessTaken));
        if (taken !== undefined) {
          this.options.log.warn({ request_id: request.requestId, route: request.route }, 'took over an Idempotency-Key claim left without an answer');
          return { answer: await this.runClaimed(kv, storeKey, taken, keys, fp, request, execute), replayed: false };
        }
        continue;
      }
      // docs/conventions.md#idempotency: a retry that arrives while the first runs waits for its answer.
      await sleep(pollMs, undefined, { signal });
      pollMs = Math.min(pollMs * 2, 200);
    }
    this.options.log.warn({ request_id: request.requestId, route: request.route }, 'an Idempotency-Key could be neither claimed nor replayed in time');
    throw unavailable();
  }

  private async runClaimed(
    kv: KV,
    storeKey: string,
    revision: number,
    keys: RecordKeys,
    fp: string,
    request: IdempotentRequest,
    execute: () => Promise<Answer>,
  ): Promise<Answer> {
    let answer: Answer;
    try {
      answer = await execute();
    } catch (err) {
      await this.release(kv, storeKey, revision, request);
      throw err;
    }
    // A dependency away (5xx) or a throttle (429) says nothing about the request: a retry should run it.
    if (answer.status >= 500 || answer.status === 429) {
      await this.release(kv, storeKey, revision, request);
      return answer;
    }
    const headers = Object.fromEntries(Object.entries(answer.headers).filter(([name]) => replayedHeaders.has(name.toLowerCase())));
    const plain = Buffer.from(JSON.stringify({ status: answer.status, headers, body: answer.body.toString('base64') }));
    const kept = answer.body.length <= maxKeptBodyBytes ? seal(keys.answer, storeKey, plain) : null;
    try {
      await this.nats(() => kv.update(storeKey, encode({ v: 1, state: 'done', kid: this.secretId, fp, answer: kept }), revision));
    } catch (err) {
      // The call ran and its answer goes to the client; a retry will wait for the takeover delay and run it again.
      this.options.log.warn(
        { request_id: request.requestId, route: request.route, err: (err as Error).message },
        'could not keep the answer of an Idempotency-Key',
      );
    }
    return answer;
  }

  private async release(kv: KV, storeKey: string, revision: number, request: IdempotentRequest): Promise<void> {
    await this.nats(() => kv.delete(storeKey, { previousSeq: revision })).catch((err: unknown) => {
      // The claim stays until the takeover delay: a retry waits that long, then runs.
      this.options.log.warn({ request_id: request.requestId, route: request.route, err: (err as Error).message }, 'could not release an Idempotency-Key');
    });
  }

  /** The bucket, created on first use (24 h TTL, one value per key); 503 while NATS is away. */
  private bucket(): Promise<KV> {
    const nc = this.nc;
    if (!nc || !this.connected) return Promise.reject(unavailable());
    this.kv ??= new Kvm(nc).create(this.options.bucket, { ttl: keptMs, history: 1, timeout: natsTimeoutMs }).catch((err: unknown) => {
      this.kv = undefined;
      this.options.log.warn({ err: (err as Error).message }, 'the Idempotency-Key bucket is unavailable');
      throw unavailable();
    });
    return this.kv;
  }

  /** A NATS operation: its failure (NATS away or too slow) is a 503 for the request. */
  private async nats<T>(operation: () => Promise<T>): Promise<T> {
    if (!this.connected) throw unavailable();
    try {
      return await operation();
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // The next request opens the bucket again (creating it if a new NATS server lost it).
      this.kv = undefined;
      this.options.log.warn({ err: (err as Error).message }, 'the Idempotency-Key bucket is unavailable');
      throw unavailable();
    }
  }

  private async followConnection(nc: NatsConnection): Promise<void> {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'close') this.connected = false;
      else if (status.type === 'reconnect') this.connected = true;
    }
  }

  /**
   * The answer a record keeps, for a replay: a 409 when it was too large to keep, or when it does
   * not open under this secret (kept before a rotation of SWITCHBOARD_IDEMPOTENCY_SECRET).
   */
  private replay(record: StoredRecord, keys: RecordKeys, storeKey: string, request: IdempotentRequest): Answer {
    if (!record.answer) throw catalogued(errorCatalogue.idempotentResultUnavailable, { limitBytes: maxKeptBodyBytes });
    let plain: Buffer;
    try {
      plain = open(keys.answer, storeKey, record.answer);
    } catch {
      // GCM authentication failed: sealed under another secret. The request ran once already.
      this.options.log.warn(
        { request_id: request.requestId, route: request.route },
        'a kept Idempotency-Key answer does not open under SWITCHBOARD_IDEMPOTENCY_SECRET (rotated since): answered 409',
      );
      throw catalogued(errorCatalogue.idempotentResultUnavailable, {});
    }
    return replayOf(plain, request);
  }
}

/** A kept answer, opened, as the replay gives it. */
function replayOf(plain: Buffer, request: IdempotentRequest): Answer {
  const kept = JSON.parse(plain.toString('utf8')) as {
    status: number;
    headers: Record<string, string>;
    body: string;
  };
  const body = Buffer.from(kept.body, 'base64');
  return { status: kept.status, headers: kept.headers, body: kept.status >= 400 ? withRequestId(body, request.requestId) : body };
}

/**
 * docs/conventions.md#errors: an error body's request_id is the X-Request-Id of the answer it is
 * in. A kept body that is not the contract's error body is replayed as it was: a replay never
 * fails on what it replays.
 */
function withRequestId(body: Buffer, requestId: string): Buffer {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  const error = (json as { error?: unknown } | null)?.error;
  if (typeof error !== 'object' || error === null) return body;
  return Buffer.from(JSON.stringify({ ...(json as object), error: { ...error, request_id: requestId } }));
}

/** The keys of one record: the answer's AES-256-GCM key and the fingerprint's HMAC key. */
interface RecordKeys {
  answer: Buffer;
  fingerprint: Buffer;
}

const hkdfSalt = 'switchboard/gateway/idempotency/v1';

/**
 * The keys of the record of one Idempotency-Key: HKDF-SHA256 of SWITCHBOARD_IDEMPOTENCY_SECRET, with
 * the record's key and the client's Idempotency-Key as the info, so neither a reader of NATS nor a
 * holder of the secret alone can read a kept answer (it may hold a new key's full_key or session
 * tokens). Not the mesh secret: that one only signs internal tokens (docs/conventions.md#idempotency).
 */
function recordKeys(secret: string, storeKey: string, idempotencyKey: string): RecordKeys {
  const derived = Buffer.from(hkdfSync('sha256', secret, hkdfSalt, `${storeKey}\n${idempotencyKey}`, 64));
  return { answer: derived.subarray(0, 32), fingerprint: derived.subarray(32) };
}

/** Names the secret a record was made under, without revealing it: 8 bytes of HKDF-SHA256 with their own info. */
function secretIdOf(secret: string): string {
  return Buffer.from(hkdfSync('sha256', secret, hkdfSalt, 'secret id', 8)).toString('base64url');
}

/** The request's fingerprint as stored: keyed, so a reader of NATS cannot test guesses of a body (a password) against it. */
function fingerprintOf(keys: RecordKeys, digest: string): string {
  return createHmac('sha256', keys.fingerprint).update(digest).digest('base64url');
}

/** A write refused because another writer got there first: undefined; any other failure is thrown. */
function unlessTaken(err: unknown): undefined {
  const code = err instanceof JetStreamApiError ? err.code : undefined;
  if (code === JetStreamApiCodes.StreamWrongLastSequence || code === JetStreamApiCodes.StreamWrongLastSequenceUnknown) return undefined;
  throw err;
}

// rest.ts adds Retry-After: 1 to every 503.
const unavailable = () => catalogued(errorCatalogue.serviceUnavailable, { dependency: 'store of Idempotency-Key answers' });

function encode(record: StoredRecord): Uint8Array {
  return Buffer.from(JSON.stringify(record));
}

function decode(entry: Pick<KvEntry, 'value'>): StoredRecord {
  return JSON.parse(Buffer.from(entry.value).toString('utf8')) as StoredRecord;
}

const ivBytes = 12;
const tagBytes = 16;

/** AES-256-GCM with the bucket key as associated data, so a sealed answer cannot be moved to another key. */
function seal(key: Buffer, associated: string, plain: Buffer): string {
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(associated));
  return Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]).toString('base64url');
}

function open(key: Buffer, associated: string, sealed: string): Buffer {
  const bytes = Buffer.from(sealed, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, ivBytes), { authTagLength: tagBytes });
  decipher.setAAD(Buffer.from(associated));
  decipher.setAuthTag(bytes.subarray(bytes.length - tagBytes));
  return Buffer.concat([decipher.update(bytes.subarray(ivBytes, bytes.length - tagBytes)), decipher.final()]);
}
