import { components, type Mesh } from '@switchboard/runtime/dev/mesh';
import fc from 'fast-check';
import { type FuzzRequest, type Json, type Operation, requestArbitrary } from './arbitraries.js';
import type { ContractOracle, FuzzResponse } from './oracle.js';
import { type FuzzWorld, parties } from './world.js';

/**
 * The fuzz property of one operation (issue 11): any generated request, sent to the gateway
 * as a client would, gets an answer that keeps the contract (oracle.ts). Used by the
 * fixed-budget test and by `npm run bench:fuzz`.
 */

/** What one run saw, for the bench's table. */
export interface Observation {
  status: number;
  problems: string[];
}

/** The request with its placeholders resolved, as text (what the caller sent and so knew). */
function sentText(request: FuzzRequest, world: FuzzWorld): { url: string; headers: Record<string, string>; body?: string; text: string } {
  const url = world.resolve(`${request.path}${request.query}`);
  const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, world.resolve(value)]));
  headers['x-forwarded-for'] = request.clientIp;
  const body = request.body === undefined ? undefined : world.resolve(request.body);
  const text = [`${request.method} ${url}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), '', body ?? ''].join('\n');
  return { url, headers, body, text };
}

/** Sends a generated request; a connection that ends without an answer is reported as status 0. */
export async function sendFuzzRequest(world: FuzzWorld, request: FuzzRequest): Promise<{ response: FuzzResponse; sent: ReturnType<typeof sentText> }> {
  const sent = sentText(request, world);
  try {
    const response = await fetch(`${world.gatewayUrl}${sent.url}`, {
      method: request.method,
      headers: sent.headers,
      body: sent.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(30_000),
    });
    return { response: { status: response.status, headers: response.headers, text: await response.text() }, sent };
  } catch (err) {
    return { response: { status: 0, headers: new Headers(), text: String((err as Error).cause ?? err) }, sent };
  }
}

/** The log lines every component wrote for one request (they carry its id), to explain a failure. */
export function requestLog(mesh: Mesh, requestId: string | null): string[] {
  if (!requestId) return [];
  return components.flatMap((component) =>
    mesh
      .output(component)
      .split('\n')
      .filter((line) => line.includes(requestId))
      .map((line) => `${component}: ${line.slice(0, 2_000)}`),
  );
}

/**
 * Whether a request went to the operation: its method, and its path (normalized as the gateway
 * does, /v1 optional for the unversioned aliases) still of the template's shape.
 */
function routedTo(operation: Operation, method: string, url: string): boolean {
  const pattern = operation.template
    .replace(/^\/v1(?=\/)/, '')
    .split(/(\{[a-z_]+\})/)
    .map((part, i) => (i % 2 === 1 ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')))
    .join('');
  return method === operation.method && new RegExp(`^(/v1)?${pattern}$`).test(new URL(url, 'http://gateway').pathname);
}

const short = (text: string, max = 600) => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text);

/** The property of `operation`: every answer keeps the contract; `observe` sees each run. */
export function fuzzProperty(
  world: FuzzWorld,
  oracle: ContractOracle,
  doc: Json,
  operation: Operation,
  options: { observe?: (observation: Observation) => void; mesh?: Mesh } = {},
): fc.IAsyncPropertyWithHooks<[FuzzRequest]> {
  return fc.asyncProperty(requestArbitrary(doc, operation), async (request) => {
    const actor = world.actorOf(request.headers.authorization);
    const { response, sent } = await sendFuzzRequest(world, request);
    const other = parties.find((party) => party !== actor);
    const withCredentials = operation.op['x-switchboard-access']?.credentials !== 'none';
    const foreignPath = actor !== undefined && withCredentials && Object.values(world.facts(other!)).some((value) => sent.url.split('?')[0].includes(value));
    const problems =
      response.status === 0
        ? [`no answer: ${response.text}`]
        : oracle.problems({
            operation,
            sentText: sent.text,
            requestId: sent.headers['x-request-id'],
            response,
            hidden: world.secretsHiddenFrom(actor, sent.text),
            foreignPath,
            method: request.method,
            routed: routedTo(operation, request.method, sent.url),
          });
    options.observe?.({ status: response.status, problems });
    if (actor && response.status >= 200 && response.status < 300 && request.method !== 'GET') world.noteStored(actor, sent.text);
    if (actor && response.status === 401) await world.mend(actor);
    if (response.status >= 200 && response.status < 300 && request.method === 'DELETE') {
      await world.remakeDeleted(decodeURIComponent(new URL(sent.url, 'http://gateway').pathname.split('/').pop()!));
    }
    if (problems.length > 0) {
      throw new Error(
        [
          `${operation.label}:`,
          ...problems.map((p) => `  - ${p}`),
          '--- sent',
          short(sent.text, 2_000),
          `--- answered ${response.status}`,
          short(response.text),
          ...(options.mesh ? ['--- logged', ...requestLog(options.mesh, response.headers.get('x-request-id'))] : []),
        ].join('\n'),
      );
    }
  });
}
