import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { deref, type Json, type Operation } from './arbitraries.js';

/**
 * What every answer of the REST surface must be, whatever was sent (issue 11, docs/conventions.md):
 * never a 5xx (501 included: nothing is unbuilt); an error status and code the operation
 * documents, in the error body of the contract with the response's request id; JSON wherever the
 * document says JSON, matching the response schema on success; no secret of another workspace;
 * another workspace's objects hidden behind 404s, never a 403 `forbidden`.
 */

export interface FuzzResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** A request as sent (placeholders resolved) and its answer. */
export interface Exchange {
  operation: Operation;
  /** The whole request as text (method, URL, headers, body): what the caller knew. */
  sentText: string;
  method: string;
  /** The X-Request-Id the request carried, if any. */
  requestId?: string;
  response: FuzzResponse;
  /** Secrets of other workspaces that must not appear in the answer. */
  hidden: string[];
  /** The path of a route with credentials names an object of another party, and the caller's credentials are valid. */
  foreignPath: boolean;
  /**
   * The path still has the operation's shape once normalized (`/v1/keys/.` is `/v1/keys/`, another
   * route): only then must the answer be one the operation documents.
   */
  routed: boolean;
}

/** Answers of the gateway itself on any route (docs/conventions.md: versions and paths; runtime/src/client-error.ts answerClientError). */
const anyRoute: Record<number, string[]> = {
  400: ['invalid_request'],
  404: ['route_not_found'],
  405: ['method_not_allowed'],
  408: ['request_timeout'],
  431: ['headers_too_large'],
};

const requestIdPattern = /^[\w.:-]{1,128}$/;
const errorKeys = new Set(['code', 'message', 'field', 'request_id', 'metadata']);

export class ContractOracle {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: false });
  private readonly validators = new Map<Json, ValidateFunction>();

  constructor(private readonly doc: Json) {
    formats.default(this.ajv);
    this.ajv.addSchema({ ...doc, $id: 'openapi.json' });
  }

  /** Every way the exchange breaks the contract ([] when it keeps it). */
  problems(exchange: Exchange): string[] {
    const { response, operation } = exchange;
    const problems: string[] = [];
    const { status } = response;
    if (status >= 500) problems.push(`status ${status}: a 5xx is a bug`);
    const requestId = response.headers.get('x-request-id');
    if (!requestId) problems.push('no X-Request-Id header');
    // A 431 is answered before the headers are read, so with a new id.
    else if (status !== 431 && exchange.requestId !== undefined && requestIdPattern.test(exchange.requestId) && requestId !== exchange.requestId)
      problems.push(`X-Request-Id ${requestId} is not the one sent (${exchange.requestId})`);

    if (status === 405 && !response.headers.get('allow')) problems.push('a 405 without Allow');
    // A HEAD answer has a GET's status and headers, no body to judge.
    if (exchange.method === 'HEAD') return problems;

    const documented = operation.op.responses as Record<string, Json>;
    const contentType = response.headers.get('content-type') ?? '';
    const success = documented[String(status)] && deref(this.doc, documented[String(status)]);
    if (status >= 200 && status < 300 && !exchange.routed) {
      if (status !== 204 && !/^application\/json\b/.test(contentType)) problems.push(`Content-Type ${contentType || '(none)'} on an answer of another route`);
    } else if (status >= 200 && status < 300) {
      if (!success) problems.push(`status ${status} is not documented for ${operation.label}`);
      const media = success?.content as Record<string, Json> | undefined;
      if (status === 204 || !media) {
        if (response.text !== '') problems.push(`status ${status} has a body`);
      } else if (media['application/json'] && /^application\/json\b/.test(contentType)) {
        problems.push(...this.schemaProblems(media['application/json'].schema, response.text));
      } else if (media['application/json'] && Object.keys(media).length === 1) {
        problems.push(`Content-Type ${contentType || '(none)'} on a JSON answer`);
      } else if (!Object.keys(media).some((type) => contentType.startsWith(type))) {
        problems.push(`Content-Type ${contentType || '(none)'} is not one of ${Object.keys(media).join(', ')}`);
      }
    } else if (status >= 300 && status < 400) {
      // Built-in pages redirect (`/` to the dashboard): a path normalized away from the API may land there.
      if (exchange.routed) problems.push(`status ${status} from an API route`);
      else if (!response.headers.get('location')) problems.push(`a ${status} without Location`);
    } else if (status >= 400) {
      problems.push(...this.errorProblems(exchange, requestId, contentType));
    }

    if (status === 401 && !/^Bearer\b/.test(response.headers.get('www-authenticate') ?? '')) problems.push('a 401 without WWW-Authenticate: Bearer');
    if (status === 429 && !response.headers.get('retry-after')) problems.push('a 429 without Retry-After');
    const leaked = exchange.hidden.filter((secret) => response.text.includes(secret));
    if (leaked.length > 0) problems.push(`the answer contains another workspace's ${leaked.join(', ')}`);
    if (exchange.foreignPath && status === 403 && errorCode(response.text) === 'forbidden') {
      problems.push("another workspace's object answered 403 forbidden, not 404");
    }
    if (exchange.foreignPath && status >= 200 && status < 300) problems.push(`another workspace's object answered ${status}`);
    return problems;
  }

  private errorProblems(exchange: Exchange, requestId: string | null, contentType: string): string[] {
    const { response, operation } = exchange;
    const problems: string[] = [];
    if (!/^application\/json\b/.test(contentType)) problems.push(`Content-Type ${contentType || '(none)'} on an error`);
    let body: Json | undefined;
    try {
      body = JSON.parse(response.text) as Json;
    } catch {
      return [...problems, `the error body is not JSON: ${response.text.slice(0, 200)}`];
    }
    const error = body?.error as Json | undefined;
    if (!error || typeof error !== 'object' || Object.keys(body!).length !== 1)
      return [...problems, `not the error body of the contract: ${response.text.slice(0, 300)}`];
    const extra = Object.keys(error).filter((key) => !errorKeys.has(key));
    if (extra.length > 0) problems.push(`the error has fields outside the contract: ${extra.join(', ')}`);
    if (typeof error.code !== 'string' || !/^[a-z][a-z0-9_]*$/.test(error.code))
      problems.push(`error.code ${JSON.stringify(error.code)} is not a snake_case string`);
    if (typeof error.message !== 'string' || error.message === '') problems.push('error.message is not a sentence');
    if (!('field' in error) || (error.field !== null && typeof error.field !== 'string')) problems.push('error.field is missing or neither a string nor null');
    if (error.request_id !== requestId) problems.push(`error.request_id ${error.request_id} is not the X-Request-Id ${requestId}`);
    if ('metadata' in error && (typeof error.metadata !== 'object' || error.metadata === null || Array.isArray(error.metadata)))
      problems.push('error.metadata is not an object');
    const codes = this.documentedCodes(operation, response.status);
    if (exchange.routed && typeof error.code === 'string' && !codes.includes(error.code)) {
      problems.push(`${response.status} ${error.code} is not documented for ${operation.label} (documented: ${codes.join(', ') || 'none'})`);
    }
    return problems;
  }

  /** The error codes the operation documents for a status, and those any route may answer. */
  private documentedCodes(operation: Operation, status: number): string[] {
    // Error responses and their examples are shared components ($refs).
    const shared = (operation.op.responses as Record<string, Json>)[status >= 500 && status !== 501 && status !== 503 ? 'default' : String(status)];
    const examples = (shared && deref(this.doc, shared).content?.['application/json']?.examples) as Record<string, Json> | undefined;
    const codes = Object.values(examples ?? {}).map((example) => deref(this.doc, example).value?.error?.code as string);
    return [...codes, ...(anyRoute[status] ?? [])];
  }

  private schemaProblems(schema: Json, text: string): string[] {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return [`the answer is not JSON: ${text.slice(0, 200)}`];
    }
    let validate = this.validators.get(schema);
    if (!validate) {
      // Local $refs point into the registered document.
      validate = this.ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/')));
      this.validators.set(schema, validate);
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).map((e) => `the answer breaks its schema: ${e.instancePath || '/'} ${e.message}`);
  }
}

function errorCode(text: string): string | undefined {
  try {
    return (JSON.parse(text) as Json)?.error?.code;
  } catch {
    return undefined;
  }
}
