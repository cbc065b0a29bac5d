import { buildOpenApiDocument } from '@switchboard/gateway/openapi';
import { buildRoutes } from '@switchboard/gateway/routes';
import type { Mesh } from '@switchboard/runtime/dev/mesh';
import { type Json, operationsOf } from '@switchboard/testkit/fuzz/arbitraries';
import { ContractOracle } from '@switchboard/testkit/fuzz/oracle';
import { fuzzProperty } from '@switchboard/testkit/fuzz/property';
import { FuzzWorld, fuzzMeshEnv } from '@switchboard/testkit/fuzz/world';
import { bootMesh } from '@switchboard/testkit/mesh';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Fuzzing (issue 11), fixed budget: every operation of the live `/v1/openapi.json` gets
 * generated valid and invalid requests, as one of two users with real data or with bad
 * credentials, and every answer must keep the contract (testkit/src/fuzz/oracle.ts): no 5xx, the
 * error body with its request id, documented statuses and codes, JSON matching the schema, no
 * secret of the other user's workspace. The seed is fixed, so a run is repeatable; fast-check
 * prints the seed and the shrunk request of a failure. `npm run bench:fuzz` runs the same
 * properties for longer.
 */

const seed = 20_251_124;
const runsPerOperation = 60;

let mesh: Mesh;
let doc: Json;
let world: FuzzWorld;
let oracle: ContractOracle;

beforeAll(async () => {
  mesh = await bootMesh(fuzzMeshEnv);
  const response = await fetch(`${mesh.gatewayUrl}/v1/openapi.json`);
  doc = (await response.json()) as Json;
  oracle = new ContractOracle(doc);
  world = await FuzzWorld.create(mesh.gatewayUrl);
});

afterAll(async () => {
  await mesh?.stop();
});

// Test names come from the document built in process; the live one must list the same operations.
const operations = operationsOf(buildOpenApiDocument(buildRoutes()) as Json);

describe('fuzzing every operation of /v1/openapi.json', () => {
  it('fuzzes the operations the gateway serves', () => {
    expect(operationsOf(doc).map((o) => o.label)).toEqual(operations.map((o) => o.label));
  });

  it.each(operations.map((operation, index) => ({ label: operation.label, index })))(
    '$label',
    async ({ label, index }) => {
      const operation = operationsOf(doc).find((o) => o.label === label)!;
      await fc.assert(fuzzProperty(world, oracle, doc, operation, { mesh }), { seed: seed + index, numRuns: runsPerOperation });
    },
    // Shrinking a failure replays many requests: room for it on a loaded machine.
    120_000,
  );
});
