import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import { KeyRefusal, KeyRefusalSchema } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api-error.js';
import { catalogued, errorCatalogue, keyRefusalError, keyRefusalOf } from '../src/error-catalogue.js';
import { toHttpError } from '../src/errors.js';
import { enumFromWire, enumToWire } from '../src/wire-enum.js';

describe('KeyRefusal on the wire', () => {
  it('is the reason string of docs/api/internal-calls.md, both ways', () => {
    const wire = KeyRefusalSchema.values.map((v) => enumToWire(KeyRefusalSchema, v.number));
    expect(wire).toEqual(['', 'unknown', 'revoked', 'spend_cap_exceeded', 'insufficient_balance', 'expired']);
    for (const v of KeyRefusalSchema.values) expect(enumFromWire(KeyRefusalSchema, enumToWire(KeyRefusalSchema, v.number))).toBe(v.number);
    expect(enumFromWire(KeyRefusalSchema, 'KEY_REFUSAL_REVOKED')).toBeUndefined();
    expect(() => enumToWire(KeyRefusalSchema, 99)).toThrow(/no value 99/);
  });

  it('reads a reason this build does not know as an unknown key', () => {
    expect(keyRefusalOf('')).toBe(KeyRefusal.UNSPECIFIED);
    expect(keyRefusalOf('revoked')).toBe(KeyRefusal.REVOKED);
    expect(keyRefusalOf('suspended')).toBe(KeyRefusal.UNKNOWN);
  });
});

describe('keyRefusalError', () => {
  const resetsAt = timestampFromDate(new Date('2026-12-01T00:00:00Z'));

  it('lets an allowed key through and answers each refusal with its catalogued error', () => {
    expect(keyRefusalError({ reason: '' }, 'rest')).toBeUndefined();
    const answer = (reason: string) => {
      const err = keyRefusalError({ reason }, 'front-door')!;
      return [err.status, err.code, err.message];
    };
    expect(answer('unknown')).toEqual([401, 'invalid_api_key', 'The API key is not valid.']);
    expect(answer('revoked')).toEqual([401, 'api_key_revoked', 'This API key has been revoked.']);
    // At the front door a balance is refused when it cannot cover the request's estimate, not only when it is used up.
    expect(answer('insufficient_balance')).toEqual([
      402,
      'insufficient_balance',
      "The workspace's balance does not cover this request's estimate (`metadata.required_usd`); top it up, or ask for fewer tokens.",
    ]);
    expect(keyRefusalError({ reason: 'insufficient_balance' }, 'rest')!.message).toBe("The workspace's balance is used up; top it up to continue.");
    expect(answer('not-a-reason')).toEqual([401, 'invalid_api_key', 'The API key is not valid.']);
  });

  it('gives a spend cap its facts, and each surface its sentence', () => {
    const facts = { reason: 'spend_cap_exceeded', capUsd: '10.00', spendUsd: '10.5', resetsAt };
    const rest = keyRefusalError(facts, 'rest')!;
    expect(rest.body('req_1')).toEqual({
      error: {
        code: 'spend_cap_exceeded',
        message: 'This key has reached a spend limit (`metadata.period`); raise or clear it, or wait for `metadata.resets_at`.',
        field: null,
        request_id: 'req_1',
        metadata: { scope: 'key', period: 'month', cap_usd: '10.00', spend_usd: '10.5', resets_at: '2026-12-01T00:00:00.000Z' },
      },
    });
    const frontDoor = keyRefusalError(facts, 'front-door')!;
    expect([frontDoor.status, frontDoor.message]).toEqual([
      402,
      'This request would take the spend past a limit of the key or the workspace (`metadata.scope`, `metadata.period`); raise or clear it, or wait for `metadata.resets_at`.',
    ]);
    expect(keyRefusalError({ reason: 'spend_cap_exceeded' }, 'rest')!.options.metadata).toEqual({
      scope: 'key',
      period: 'month',
      cap_usd: null,
      spend_usd: null,
      resets_at: null,
    });
  });
});

describe('the catalogue', () => {
  it('holds one entry per snake_case code, each with an error status, a sentence and a description', () => {
    const entries = Object.values(errorCatalogue);
    expect(new Set(entries.map((e) => e.code)).size).toBe(entries.length);
    for (const e of entries) {
      expect(e.code).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(e.status).toBeGreaterThanOrEqual(400);
      expect(e.status).toBeLessThan(600);
      expect(e.message).not.toBe('');
      expect(e.when).not.toBe('');
    }
  });

  it('makes an ApiError of an entry, with the body of docs/conventions.md', () => {
    const err = catalogued(errorCatalogue.workspaceMismatch);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.body('req_2')).toEqual({
      error: { code: 'workspace_mismatch', message: 'An API key can only act in its own workspace.', field: null, request_id: 'req_2' },
    });
    expect(catalogued(errorCatalogue.spendCapExceeded, {}, 'front-door').message).toBe(errorCatalogue.spendCapExceeded.frontDoorMessage);
    // The front door's sentence is only for the front door.
    expect(catalogued(errorCatalogue.invalidJson, {}, 'front-door').message).toBe('The request body is not valid JSON.');
  });

  it('builds a message from the facts of the request, as the surfaces answered it before the catalogue', () => {
    const answer = (err: ApiError) => [err.status, err.code, err.message, err.options.headers];
    expect(answer(catalogued(errorCatalogue.routeNotFound, { method: 'GET', path: '/x' }))).toEqual([
      404,
      'route_not_found',
      'No route for GET /x.',
      undefined,
    ]);
    expect(answer(catalogued(errorCatalogue.methodNotAllowed, { method: 'PUT', allowed: ['GET', 'POST'] }, { headers: { Allow: 'GET, POST' } }))).toEqual([
      405,
      'method_not_allowed',
      'PUT is not allowed here; use GET, POST.',
      { Allow: 'GET, POST' },
    ]);
    expect(answer(catalogued(errorCatalogue.payloadTooLarge, { limitBytes: 1024 * 1024 }))).toEqual([
      413,
      'payload_too_large',
      'The request body is larger than 1048576 bytes.',
      undefined,
    ]);
    expect(catalogued(errorCatalogue.unauthenticated, { headerSent: false }).message).toBe(
      'Authentication required: send Authorization: Bearer <access token or API key>.',
    );
    expect(catalogued(errorCatalogue.unauthenticated, { headerSent: true }).message).toBe('The Authorization header must be "Bearer <token>".');
    for (const headerSent of [false, true]) {
      expect(catalogued(errorCatalogue.unauthenticated, { headerSent }, {}, 'front-door').message).toBe('Send an API key: Authorization: Bearer sb_….');
    }
    expect(errorCatalogue.serviceUnavailable.message({})).toBe('A service this request needs is unavailable; try again shortly.');
    expect(errorCatalogue.serviceUnavailable.message({ dependency: 'data plane' })).toBe('The data plane is unavailable; try again shortly.');
    expect(errorCatalogue.serviceUnavailable.message({ because: 'shutdown' })).toBe(
      'The data plane is shutting down; what was produced is billed. Retry the request.',
    );
    expect(errorCatalogue.serviceUnavailable.message({ because: 'routedModelMissing' })).toBe(
      'The routed model is not in this data plane’s catalog; try again shortly.',
    );
  });

  it('answers the input errors and the refusals Node makes before any route with their status and sentence', () => {
    const answer = (err: ApiError) => [err.status, err.code, err.message, err.options.field];
    expect(answer(catalogued(errorCatalogue.invalidRequest, { problem: 'n must be an integer from 1 to 16.' }, { field: 'n' }))).toEqual([
      400,
      'invalid_request',
      'n must be an integer from 1 to 16.',
      'n',
    ]);
    expect(answer(catalogued(errorCatalogue.headersTooLarge))).toEqual([431, 'headers_too_large', 'The request headers are too large.', undefined]);
    expect(answer(catalogued(errorCatalogue.requestTimeout))).toEqual([408, 'request_timeout', 'The request was not received in time.', undefined]);
  });

  it('answers the front door’s model, routing and upstream errors as it did before the catalogue (docs/api/front-door.md#errors)', () => {
    const answer = (err: ApiError) => [err.status, err.code, err.message];
    expect(answer(catalogued(errorCatalogue.modelUnavailable, { model: 'gpt-9' }, {}, 'front-door'))).toEqual([
      400,
      'model_unavailable',
      'The model "gpt-9" is not served here; GET /v1/models lists the models.',
    ]);
    // The client's name is repeated at most 100 characters long.
    expect(errorCatalogue.modelUnavailable.message({ model: 'x'.repeat(500) })).toBe(
      `The model "${'x'.repeat(100)}" is not served here; GET /v1/models lists the models.`,
    );
    expect(answer(catalogued(errorCatalogue.routingPolicyViolation, { model: 'qwen-max', policy: 'overseas-only' }, {}, 'front-door'))).toEqual([
      403,
      'routing_policy_violation',
      "The model qwen-max is served only in a region this key's overseas-only routing policy excludes.",
    ]);
    expect(errorCatalogue.routingPolicyViolation.message({ tier: 'fast', policy: 'cn-only' })).toBe(
      'No model of the fast tier is allowed by the cn-only routing policy.',
    );
    expect(answer(catalogued(errorCatalogue.upstreamRejected, { reason: 'context too long' }, {}, 'front-door'))).toEqual([
      400,
      'upstream_rejected',
      'The model provider refused the request: context too long',
    ]);
    expect(answer(catalogued(errorCatalogue.upstreamError, { failure: 'HTTP 500' }, {}, 'front-door'))).toEqual([
      502,
      'upstream_error',
      'The model provider failed: HTTP 500.',
    ]);
    expect(errorCatalogue.upstreamError.message({ streamEndedEarly: true })).toBe('The upstream stream ended early.');
    expect(answer(catalogued(errorCatalogue.streamTooLong, {}, 'front-door'))).toEqual([
      504,
      'stream_too_long',
      'The stream ran past its longest duration (STREAM_MAX_DURATION) and was cut; what was produced is billed.',
    ]);
  });

  it('is what toHttpError answers for a service that is away or failed without saying why', () => {
    const away = toHttpError(new ConnectError('connect ECONNREFUSED', Code.Unavailable), 'req_3');
    expect([away.status, away.body.error.code, away.body.error.message]).toEqual([
      errorCatalogue.serviceUnavailable.status,
      errorCatalogue.serviceUnavailable.code,
      errorCatalogue.serviceUnavailable.message({}),
    ]);
    const bug = toHttpError(new ConnectError('TypeError: x is undefined', Code.Internal), 'req_4');
    expect([bug.status, bug.body.error.code, bug.body.error.message]).toEqual([
      errorCatalogue.internalError.status,
      errorCatalogue.internalError.code,
      errorCatalogue.internalError.message,
    ]);
  });
});
