import { Code, ConnectError } from '@connectrpc/connect';
import { errorFromJsonBytes, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import { ErrorDetailSchema } from '@switchboard/contracts/switchboard/api/v1/options_pb';
import { describe, expect, it } from 'vitest';
import { apiError, errorBody, invalidArgument, notFound, toHttpError, unprocessable } from '../src/errors.js';

const requestId = 'req_test123';

describe('apiError', () => {
  it('carries the Connect code, the message and an ErrorDetail', () => {
    const err = apiError(Code.FailedPrecondition, 'some_rule', 'A person-readable sentence.', {
      field: 'full_name',
      httpStatus: 422,
      metadata: { a: 1, nested: { b: [true, 'x'] } },
    });
    expect(err).toBeInstanceOf(ConnectError);
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toBe('A person-readable sentence.');
    const details = err.findDetails(ErrorDetailSchema);
    expect(details).toHaveLength(1);
    expect(details[0]).toMatchObject({ code: 'some_rule', field: 'full_name', httpStatus: 422, metadata: { a: 1, nested: { b: [true, 'x'] } } });
  });

  it('defaults field to empty and httpStatus to 0 (derived)', () => {
    const [detail] = apiError(Code.NotFound, 'not_found', 'Nope.').findDetails(ErrorDetailSchema);
    expect(detail).toMatchObject({ code: 'not_found', field: '', httpStatus: 0 });
    expect(detail.metadata).toBeUndefined();
  });

  it('has shorthands for 400, 404 and 422', () => {
    expect(toHttpError(invalidArgument('email', 'Bad email.'), requestId)).toEqual({
      status: 400,
      body: { error: { code: 'invalid_request', message: 'Bad email.', field: 'email', request_id: requestId } },
    });
    expect(toHttpError(invalidArgument('role', 'No.', 'invalid_role'), requestId).body.error.code).toBe('invalid_role');
    expect(toHttpError(notFound('Key'), requestId)).toEqual({
      status: 404,
      body: { error: { code: 'not_found', message: 'Key not found', field: null, request_id: requestId } },
    });
    const rule = toHttpError(unprocessable('not_a_member', 'Not a member.', { field: 'user_id', metadata: { org_id: 'org_1' } }), requestId);
    expect(rule).toEqual({
      status: 422,
      body: { error: { code: 'not_a_member', message: 'Not a member.', field: 'user_id', request_id: requestId, metadata: { org_id: 'org_1' } } },
    });
  });
});

describe('toHttpError', () => {
  // Status and default public code for a Connect error without an ErrorDetail.
  const byCode: Array<[string, Code, number, string]> = [
    ['InvalidArgument', Code.InvalidArgument, 400, 'invalid_request'],
    ['OutOfRange', Code.OutOfRange, 400, 'invalid_request'],
    ['Unauthenticated', Code.Unauthenticated, 401, 'unauthenticated'],
    ['PermissionDenied', Code.PermissionDenied, 403, 'forbidden'],
    ['NotFound', Code.NotFound, 404, 'not_found'],
    ['AlreadyExists', Code.AlreadyExists, 409, 'conflict'],
    ['Aborted', Code.Aborted, 409, 'conflict'],
    ['FailedPrecondition', Code.FailedPrecondition, 422, 'unprocessable'],
    ['ResourceExhausted', Code.ResourceExhausted, 429, 'rate_limited'],
    ['Unknown', Code.Unknown, 500, 'internal_error'],
    ['Internal', Code.Internal, 500, 'internal_error'],
    ['DataLoss', Code.DataLoss, 500, 'internal_error'],
    ['Unimplemented', Code.Unimplemented, 501, 'not_implemented'],
    ['Unavailable', Code.Unavailable, 503, 'service_unavailable'],
    ['DeadlineExceeded', Code.DeadlineExceeded, 503, 'service_unavailable'],
    ['Canceled', Code.Canceled, 503, 'service_unavailable'],
  ];

  it.each(byCode)('maps a bare %s to %i %s', (_name, code, status, errorCode) => {
    const { status: got, body } = toHttpError(new ConnectError('raw text from a service', code), requestId);
    expect(got).toBe(status);
    expect(body.error.code).toBe(errorCode);
    expect(body.error.field).toBeNull();
    expect(body.error.request_id).toBe(requestId);
    expect('metadata' in body.error).toBe(false);
    if (status < 500) expect(body.error.message).toBe('raw text from a service');
    // A 5xx never shows what the service wrote.
    else expect(body.error.message).not.toContain('raw text');
  });

  it.each(byCode)('keeps the status of %s with an ErrorDetail and uses its code, field and message', (_name, code, status) => {
    const err = apiError(code, 'specific_code', 'A specific sentence.', { field: 'some.field' });
    const { status: got, body } = toHttpError(err, requestId);
    expect(got).toBe(status);
    expect(body.error.code).toBe('specific_code');
    expect(body.error.field).toBe('some.field');
    if (status === 500) expect(body.error.message).not.toContain('A specific sentence');
    else expect(body.error.message).toBe('A specific sentence.');
  });

  it('lets ErrorDetail.httpStatus override the status (402, 413, 415, 422)', () => {
    const capExceeded = apiError(Code.ResourceExhausted, 'spend_cap_exceeded', 'The key reached its monthly cap.', {
      httpStatus: 402,
      metadata: { scope: 'key', cap_usd: '10.00', spend_usd: '10.01' },
    });
    expect(toHttpError(capExceeded, requestId)).toEqual({
      status: 402,
      body: {
        error: {
          code: 'spend_cap_exceeded',
          message: 'The key reached its monthly cap.',
          field: null,
          request_id: requestId,
          metadata: { scope: 'key', cap_usd: '10.00', spend_usd: '10.01' },
        },
      },
    });
    expect(toHttpError(apiError(Code.InvalidArgument, 'rule', 'Breaks a rule.', { httpStatus: 422 }), requestId).status).toBe(422);
    expect(toHttpError(apiError(Code.FailedPrecondition, 'rule', 'Breaks a rule.', { httpStatus: 422, field: 'x' }), requestId)).toMatchObject({
      status: 422,
      body: { error: { code: 'rule', field: 'x' } },
    });
    expect(toHttpError(apiError(Code.ResourceExhausted, 'payload_too_large', 'Too big.', { httpStatus: 413 }), requestId).status).toBe(413);
    expect(toHttpError(apiError(Code.InvalidArgument, 'unsupported_media_type', 'JSON please.', { httpStatus: 415 }), requestId).status).toBe(415);
  });

  it('passes metadata through untouched, and leaves an empty one out', () => {
    const metadata = { retry_after_seconds: 30, scope: 'account', list: [1, 'two', null], deep: { ok: true } };
    expect(toHttpError(apiError(Code.ResourceExhausted, 'rate_limited', 'Slow down.', { metadata }), requestId).body.error.metadata).toEqual(metadata);
    expect('metadata' in toHttpError(apiError(Code.ResourceExhausted, 'rate_limited', 'Slow down.', { metadata: {} }), requestId).body.error).toBe(false);
  });

  it('hides the internal message of a 500 but keeps the request id', () => {
    const { status, body } = toHttpError(new ConnectError('relation "identity.accounts" does not exist at db.ts:42', Code.Internal), requestId);
    expect(status).toBe(500);
    expect(body.error.message).not.toMatch(/relation|db\.ts|accounts/);
    expect(body.error.message.length).toBeGreaterThan(0);
    expect(body.error.request_id).toBe(requestId);
  });

  it('words a bare 503 and 501 for a person; a detailed one keeps its sentence', () => {
    expect(toHttpError(new ConnectError('connect ECONNREFUSED 127.0.0.1:50052', Code.Unavailable), requestId).body.error.message).not.toContain('ECONNREFUSED');
    expect(toHttpError(new ConnectError('method not found', Code.Unimplemented), requestId).body.error.message).not.toContain('method not found');
    expect(
      toHttpError(apiError(Code.Unavailable, 'service_unavailable', 'The database is unavailable; try again shortly.'), requestId).body.error.message,
    ).toBe('The database is unavailable; try again shortly.');
  });

  it('gives field null, never "", when the detail names none', () => {
    expect(toHttpError(apiError(Code.InvalidArgument, 'bad', 'Bad.'), requestId).body.error.field).toBeNull();
    expect(toHttpError(apiError(Code.InvalidArgument, 'bad', 'Bad.', { field: '' }), requestId).body.error.field).toBeNull();
  });

  it('survives the error crossing the wire (details decoded from the Connect error JSON)', () => {
    const original = apiError(Code.FailedPrecondition, 'some_rule', 'msg', { field: 'full_name', httpStatus: 422, metadata: { a: 1 } });
    const fallback = new ConnectError('fallback', Code.Unknown);
    const wire = errorFromJsonBytes(errorToJsonBytes(original, {}), undefined, fallback);
    expect(wire).not.toBe(fallback);
    // On the client side the detail is raw bytes until findDetails decodes it.
    expect(wire.details[0]).toMatchObject({ type: ErrorDetailSchema.typeName });
    expect(toHttpError(wire, requestId)).toEqual({
      status: 422,
      body: { error: { code: 'some_rule', message: 'msg', field: 'full_name', request_id: requestId, metadata: { a: 1 } } },
    });
  });
});

describe('errorBody', () => {
  it('builds the public error body with field null by default and metadata only when given', () => {
    expect(errorBody('route_not_found', 'No route.', requestId)).toEqual({
      error: { code: 'route_not_found', message: 'No route.', field: null, request_id: requestId },
    });
    expect(errorBody('invalid_request', 'Bad limit.', requestId, 'limit', { max: 100 })).toEqual({
      error: { code: 'invalid_request', message: 'Bad limit.', field: 'limit', request_id: requestId, metadata: { max: 100 } },
    });
    expect('metadata' in errorBody('x', 'y', requestId).error).toBe(false);
  });
});
