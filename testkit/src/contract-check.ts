import { buildOpenApiDocument } from '@switchboard/gateway/openapi';
import { Router } from '@switchboard/gateway/router';
import { buildRoutes } from '@switchboard/gateway/routes';
import { type Operation, operationsOf } from './fuzz/arbitraries.js';
import { ContractOracle } from './fuzz/oracle.js';

/**
 * Every successful answer a test gets through `restClient` keeps the contract of its operation
 * (fuzz/oracle.ts: the documented status, JSON matching the response schema). The
 * SDK's types are generated from those schemas, so a field the document says is never null
 * (`always_set`) must be set in every answer the suites see, not only in the fuzzer's.
 */
class SuccessContract {
  private readonly router: Router;
  private readonly oracle: ContractOracle;
  private readonly operations = new Map<string, Operation>();

  constructor() {
    const routes = buildRoutes();
    const doc = buildOpenApiDocument(routes);
    this.router = new Router(routes);
    this.oracle = new ContractOracle(doc);
    for (const operation of operationsOf(doc)) this.operations.set(operation.op.operationId, operation);
  }

  /** How a 2xx answer to `method url` breaks its operation's contract ([] when it keeps it, or the path is no API route). */
  problems(method: string, url: string, response: { status: number; headers: Headers; text: string }): string[] {
    if (response.status < 200 || response.status >= 300 || method === 'HEAD') return [];
    const match = this.router.match(method, new URL(url).pathname);
    if (!match || !('route' in match)) return [];
    const operation = this.operations.get(`${match.route.method.parent.name}_${match.route.method.name}`);
    if (!operation) return [];
    return this.oracle.problems({ operation, sentText: '', method, response, hidden: [], foreignPath: false, routed: true });
  }
}

let contract: SuccessContract | undefined;

/** Throws when a successful answer breaks its operation's contract. */
export function expectSuccessKeepsContract(method: string, url: string, response: { status: number; headers: Headers; text: string }): void {
  contract ??= new SuccessContract();
  const problems = contract.problems(method, url, response);
  if (problems.length > 0)
    throw new Error(`${method} ${url} answered ${response.status} outside its contract: ${problems.join('; ')}\n${response.text.slice(0, 2000)}`);
}
