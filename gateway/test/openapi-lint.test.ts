import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { openApiDocumentText } from '../src/openapi-export.js';

/**
 * The document against Redocly's recommended rules (redocly.yaml at the root, what
 * `npx redocly lint sdk/openapi.json` reads), offline: the CLI's telemetry and update check are
 * off, and the recommended ruleset is built in.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let dir: string | undefined;

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Problem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: Array<{ pointer: string }>;
}

describe('redocly lint', () => {
  it('reports no error with the recommended rules', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'openapi-lint-'));
    const file = path.join(dir, 'openapi.json');
    await writeFile(file, openApiDocumentText());
    const { stdout } = await promisify(execFile)(
      path.join(root, 'node_modules/.bin/redocly'),
      ['lint', file, '--config', path.join(root, 'redocly.yaml'), '--format', 'json'],
      {
        cwd: dir,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        maxBuffer: 64 * 1024 * 1024,
      },
    ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const { totals, problems } = JSON.parse(stdout) as { totals: { errors: number }; problems: Problem[] };
    const listed = (severity: Problem['severity']) =>
      problems.filter((p) => p.severity === severity).map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(listed('error')).toEqual([]);
    expect(totals.errors).toBe(0);
    // The one warning left: the project has declared no license, and the document does not invent one (DECISIONS-doc.md).
    expect(listed('warn')).toEqual(['info-license at #/info: Info object should contain `license` field.']);
  }, 120_000);
});
