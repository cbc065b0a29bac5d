import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootMesh } from './mesh.js';

const run = promisify(execFile);

/** The README's curl walk-throughs: every ```sh block that starts by setting API=. */
const walkThroughs = readFileSync(path.join(repoRoot, 'README.md'), 'utf8')
  .split(/^```sh\n/m)
  .slice(1)
  .map((block) => block.slice(0, block.indexOf('\n```')))
  .filter((block) => block.startsWith('API='));

let mesh: Mesh;

beforeAll(async () => {
  mesh = await bootMesh();
});

afterAll(async () => {
  await mesh?.stop();
});

describe('the README walk-throughs work as written', () => {
  it('has walk-throughs to run', () => {
    expect(walkThroughs.length).toBeGreaterThanOrEqual(2);
  });

  it.each(walkThroughs.map((script, index) => [index + 1, script]))('walk-through %i', async (_index, script) => {
    // Only the addresses change: the gateway and the mailbox of this test's mesh.
    const adapted = (script as string).replace(/^API=.*$/m, `API=${mesh.gatewayUrl}`).replace(/^MAILBOX=\S*/m, `MAILBOX=${mesh.env.MAILBOX_DIR}`);
    const { stdout, stderr } = await run('bash', ['-e', '-o', 'pipefail', '-c', adapted], { cwd: repoRoot, timeout: 60_000 });
    expect(stderr).not.toMatch(/jq: error|command not found|parse error/);
    expect(stdout).not.toMatch(/"code": "internal_error"|HTTP\/1\.1 5\d\d/);
    expect(stdout).not.toMatch(/^null$/m);
  });
});
