import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { bootMesh } from '@switchboard/testkit/mesh';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);

/** The README's walk-throughs: every ```sh block that starts by setting API=. */
const walkThroughs = readFileSync(path.join(repoRoot, 'README.md'), 'utf8')
  .split(/^```sh\n/m)
  .slice(1)
  .map((block) => block.slice(0, block.indexOf('\n```')))
  .filter((block) => block.startsWith('API='));
/** The front door's, which calls it with the official `openai` client (the demo upstream answers it). */
const frontDoor = walkThroughs.find((block) => block.includes("from 'openai'"));

describe('the README walk-throughs work as written', () => {
  let mesh: Mesh;

  beforeAll(async () => {
    // As `npm start` runs for a newcomer: the demo upstream on, no provider key.
    mesh = await bootMesh({ DEMO_UPSTREAM: 'true', OVERSEAS_API_KEY: '', CN_API_KEY: '' });
  });

  afterAll(async () => {
    await mesh?.stop();
  });

  /** Runs a walk-through in bash from the repository root; only the addresses change: the gateway and the mailbox of this test's mesh. */
  async function runWalkThrough(script: string): Promise<{ stdout: string; stderr: string }> {
    const adapted = script.replace(/^API=.*$/m, `API=${mesh.gatewayUrl}`).replace(/^MAILBOX=\S*/m, `MAILBOX=${mesh.env.MAILBOX_DIR}`);
    const { stdout, stderr } = await run('bash', ['-e', '-o', 'pipefail', '-c', adapted], { cwd: repoRoot, timeout: 60_000 });
    expect(stderr).not.toMatch(/jq: error|command not found|parse error/);
    expect(stdout).not.toMatch(/"code": "internal_error"|HTTP\/1\.1 5\d\d/);
    expect(stdout).not.toMatch(/^null$/m);
    return { stdout, stderr };
  }

  it('has walk-throughs to run', () => {
    expect(walkThroughs.length).toBeGreaterThanOrEqual(2);
    expect(frontDoor).toBeDefined();
  });

  it.each(walkThroughs.filter((script) => script !== frontDoor).map((script, index) => [index + 1, script]))('walk-through %i', async (_index, script) => {
    await runWalkThrough(script as string);
  });

  it('the front door: the openai client and curl print demo completions, billed, with no provider key', async () => {
    const { stdout, stderr } = await runWalkThrough(frontDoor!);
    // Twice through the client (a completion, a stream), once through curl's stream.
    expect(
      stdout.match(/This is Switchboard's demo upstream, answering as [\w.-]+ in the (overseas|cn) region because (OVERSEAS|CN)_API_KEY is not set/g),
    ).toHaveLength(2);
    expect(stdout).toMatch(/^\{\s+generation_id: 'gen_\w+',\s+tier: 'fast'/m);
    expect(stdout).toMatch(/^data: .*"service":\{"generation_id":"gen_\w+","tier":"fast".*"cost_usd":"0\.\d+"/m);
    expect(stdout).toMatch(/^data: \[DONE\]$/m);
    // No progress meter: -sS keeps curl quiet unless it fails.
    expect(stderr).toBe('');
  });
});

// --- The documentation stands alone: its links resolve inside the repository. ----------------

/** Folders that hold no documentation of ours. */
const skippedFolders = new Set(['node_modules', '.git', '.data', 'dist', 'gen', 'results']);

/** Every Markdown file of the repository (README.md, docs/, deploy/, …), relative to its root. */
function markdownFiles(folder = ''): string[] {
  return readdirSync(path.join(repoRoot, folder), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.posix.join(folder, entry.name);
    if (entry.isDirectory()) return skippedFolders.has(entry.name) ? [] : markdownFiles(relative);
    return entry.name.endsWith('.md') ? [relative] : [];
  });
}

/** The lines outside fenced code blocks, with inline code spans emptied. */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').flatMap((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return [];
    }
    return fenced ? [] : [line.replace(/`[^`]*`/g, '``')];
  });
}

/** The anchors GitHub gives the headings of a Markdown file (github-slugger's rules). */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

interface Link {
  file: string;
  target: string;
}

/** Inline links `[text](target)` and reference definitions `[label]: target` of a file. */
function linksOf(file: string): Link[] {
  return proseLines(readFileSync(path.join(repoRoot, file), 'utf8')).flatMap((line) => [
    ...[...line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => ({ file, target: match[1] })),
    ...[...line.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/g)].map((match) => ({ file, target: match[1] })),
  ]);
}

/** What is wrong with a relative link, or undefined when it resolves inside the repository. */
function brokenLink({ file, target }: Link): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not a file of ours
  const [rawPath, fragment] = target.split('#', 2);
  const resolved = rawPath ? path.resolve(repoRoot, path.dirname(file), decodeURIComponent(rawPath)) : path.join(repoRoot, file);
  const relative = path.relative(repoRoot, resolved);
  if (relative.startsWith('..') || path.isAbsolute(relative)) return `${file}: ${target} points outside the repository`;
  if (!existsSync(resolved)) return `${file}: ${target} names no file of the repository`;
  if (fragment && resolved.endsWith('.md') && !headingAnchors(readFileSync(resolved, 'utf8')).has(decodeURIComponent(fragment))) {
    return `${file}: ${target} names no heading of ${relative}`;
  }
  return undefined;
}

describe('the documentation stands alone', () => {
  const files = markdownFiles();

  it('finds the README and the docs', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/README.md', 'docs/conventions.md', 'docs/operations.md']));
  });

  it('has relative links that resolve to files and headings of the repository', () => {
    const links = files.flatMap(linksOf);
    expect(links.length).toBeGreaterThan(20);
    expect(links.map(brokenLink).filter(Boolean)).toEqual([]);
  });

  it('names no document outside the repository', () => {
    const outside = files.flatMap((file) =>
      readFileSync(path.join(repoRoot, file), 'utf8')
        .split('\n')
        .flatMap((line, index) => (/\.\.\/shared\b|shared\/SPEC|SPEC\.md|SPEC §/.test(line) ? [`${file}:${index + 1}: ${line.trim()}`] : [])),
    );
    expect(outside).toEqual([]);
  });

  it('catches a broken link', () => {
    expect(brokenLink({ file: 'README.md', target: 'docs/no-such-page.md' })).toMatch(/names no file/);
    expect(brokenLink({ file: 'README.md', target: '../shared/SPEC.md' })).toMatch(/outside the repository/);
    expect(brokenLink({ file: 'docs/README.md', target: 'conventions.md#no-such-heading' })).toMatch(/names no heading/);
    expect(brokenLink({ file: 'docs/README.md', target: 'conventions.md#errors' })).toBeUndefined();
  });
});
