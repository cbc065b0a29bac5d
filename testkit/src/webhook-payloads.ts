import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import path from 'node:path';
import { webhookEventType } from '@switchboard/contracts/webhook-events';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { expect } from 'vitest';

/**
 * Every delivery a test receiver gets must fit the published schema of its type (the event
 * catalog, docs/webhooks.md#the-event-catalog): the suite-wide check that what the system emits is
 * what it documents. A body that does not fit is logged at once and written down as a finding in
 * the run's data directory; runtime/test/global-setup.ts fails the run on any finding at teardown
 * (a receiver's handler cannot fail the test that is running).
 */

const ajv = new Ajv2020({ strict: true, allErrors: true });
formats.default(ajv);
const validators = new Map<string, ValidateFunction>();

function validatorOf(type: string): ValidateFunction | undefined {
  let validate = validators.get(type);
  if (!validate) {
    const entry = webhookEventType(type);
    if (!entry) return undefined;
    validate = ajv.compile(entry.schema);
    validators.set(type, validate);
  }
  return validate;
}

/** Why a delivered body breaks the catalog, or undefined when it fits its type's schema. */
export function payloadProblem(body: string): string | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return 'the body is not JSON';
  }
  const type = json !== null && typeof json === 'object' ? (json as { type?: unknown }).type : undefined;
  if (typeof type !== 'string') return 'the body has no type';
  const validate = validatorOf(type);
  if (!validate) return `${type} is not in the event catalog`;
  return validate(json) ? undefined : `${type}: ${ajv.errorsText(validate.errors)}`;
}

const findingsDir = (dataDir: string) => path.join(dataDir, 'webhook-payloads');

/**
 * Checks a request a test receiver got (at `where`), and records a finding when it is a delivery
 * (it has a `webhook-id`) whose body breaks the catalog. Tests' own probes of a receiver are not.
 */
export function checkDeliveredPayload(request: { headers: IncomingHttpHeaders; body: string }, where: string): void {
  if (request.headers['webhook-id'] === undefined) return;
  const body = request.body;
  const problem = payloadProblem(body);
  if (!problem) return;
  const test = expect.getState().testPath ?? 'unknown test file';
  const finding = { test, where, problem, body: body.slice(0, 4096) };
  console.error(`A webhook delivery does not fit its published schema (${test}, ${where}): ${problem}\n${finding.body}`);
  const dataDir = process.env.TEST_DATA_DIR;
  if (!dataDir) return;
  mkdirSync(findingsDir(dataDir), { recursive: true });
  writeFileSync(path.join(findingsDir(dataDir), `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}.json`), JSON.stringify(finding));
}

/** Deliveries that broke the catalog during the run (global-setup's teardown). */
export class WebhookPayloadError extends Error {}

/** Throws a WebhookPayloadError listing every finding of the run, if any. */
export function checkPayloadFindings(dataDir: string): void {
  let files: string[];
  try {
    files = readdirSync(findingsDir(dataDir));
  } catch {
    return; // no finding was written
  }
  if (files.length === 0) return;
  const findings = files.map(
    (file) => JSON.parse(readFileSync(path.join(findingsDir(dataDir), file), 'utf8')) as { test: string; where: string; problem: string },
  );
  throw new WebhookPayloadError(
    `${findings.length} webhook deliveries did not fit their published schema (docs/webhooks.md#the-event-catalog):\n${findings
      .map((f) => `- ${f.test} (${f.where}): ${f.problem}`)
      .join('\n')}`,
  );
}
