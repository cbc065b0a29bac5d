import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Mesh, repoRoot } from '@switchboard/runtime/dev/mesh';
import { Money } from '@switchboard/runtime/money';
import { eventually } from '@switchboard/runtime/testing';
import { bootMesh, restClient, signUp, topUp } from '@switchboard/testkit/mesh';
import OpenAI from 'openai';
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
/** Auto top-up's, whose charge runs in the background: its ledger entry and the month's statement are checked. */
const autoTopup = walkThroughs.find((block) => block.includes('/v1/billing/auto-topup'));
/** Keys II's: an inference-only key with a daily budget and a rate limit, hitting each, then rotated. */
const keyLimits = walkThroughs.find((block) => block.includes('"scopes": ["inference"]'));
/** Usage as CSV, a generation by id, and the audit log after a key is created and revoked. */
const usageAndAudit = walkThroughs.find((block) => block.includes('/v1/audit-events'));

describe('the README walk-throughs work as written', () => {
  let mesh: Mesh;

  beforeAll(async () => {
    // As npm start runs it: the demo upstream, the sandbox, workspaces opening at 0.
    mesh = await bootMesh({ DEMO_UPSTREAM: 'true', OVERSEAS_API_KEY: '', CN_API_KEY: '', SANDBOX_OPENING_CREDIT_USD: '0' });
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
    // The webhook walk-through's receiver is this machine by name, refused before any lookup, as it says.
    if ((script as string).includes('hooks.localhost')) expect(stdout).toContain('"error_class": "blocked_address"');
    return { stdout, stderr };
  }

  it('has walk-throughs to run', () => {
    expect(walkThroughs.length).toBeGreaterThanOrEqual(2);
    expect(frontDoor).toBeDefined();
    expect(autoTopup).toBeDefined();
    expect(keyLimits).toBeDefined();
    expect(usageAndAudit).toBeDefined();
  });

  it.each(walkThroughs.filter((script) => ![frontDoor, autoTopup, keyLimits, usageAndAudit].includes(script)).map((script, index) => [index + 1, script]))(
    'walk-through %i',
    async (_index, script) => {
      await runWalkThrough(script as string);
    },
  );

  it('the front door: the openai client and curl print demo completions, billed, with no provider key', async () => {
    const { stdout, stderr } = await runWalkThrough(frontDoor!);
    // Whole from the client, once a completion and once a stream (curl shows its stream's events, a word each).
    expect(
      stdout.match(/This is Switchboard's demo upstream, answering as [\w.-]+ in the (overseas|cn) region because (OVERSEAS|CN)_API_KEY is not set/g),
    ).toHaveLength(2);
    expect(stdout).toMatch(/^\{\s+generation_id: 'gen_\w+',\s+tier: 'fast'/m);
    expect(stdout).toMatch(/^data: .*"service":\{"generation_id":"gen_\w+","tier":"fast".*"cost_usd":"0\.\d+"/m);
    expect(stdout).toMatch(/^data: \[DONE\]$/m);
    // No progress meter: -sS keeps curl quiet unless it fails.
    expect(stderr).toBe('');
  });

  it('auto top-up with the sandbox: a test card saved, charged at once below the threshold, in the ledger and the statement', async () => {
    const { stdout } = await runWalkThrough(autoTopup!);
    const lines = stdout.split('\n').filter((line) => line.startsWith('{'));
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const [before, card, listed, settings, after, standing] = parsed;
    expect(card).toMatchObject({ payment_method_id: expect.stringMatching(/^pm_/), last4: '4242', default: true });
    expect(listed).toMatchObject({ last4: '4242', default: true });
    expect(settings).toMatchObject({ enabled: true, payment_method_id: card.payment_method_id });
    // Charged once, 10.00: the balance has exactly that much more.
    expect(new Money(after.balance_usd as string).eq(new Money(before.balance_usd as string).plus('10'))).toBe(true);
    expect(new Money(standing.charged_this_month_usd as string).eq('10')).toBe(true);
    expect(standing).toMatchObject({ enabled: true, consecutive_failures: 0 });
    const entries = parsed.filter((line) => 'type' in line);
    expect(entries[0]).toMatchObject({ type: 'auto_topup' });
    expect(new Money(entries[0].amount_usd as string).eq('10')).toBe(true);
    expect(new Money(entries[0].balance_after_usd as string).eq(after.balance_usd as string)).toBe(true);
    expect(entries.filter((entry) => entry.type === 'auto_topup')).toHaveLength(1);
    // The statement adds up, exactly, to the balance now.
    const statement = parsed.at(-1) as Record<string, string>;
    expect(statement.month).toBe(new Date().toISOString().slice(0, 7));
    const closing = new Money(statement.opening_balance_usd).plus(statement.credits_usd).minus(statement.usage_usd).minus(statement.refunds_usd);
    expect(closing.eq(statement.closing_balance_usd)).toBe(true);
    expect(new Money(statement.closing_balance_usd).eq(after.balance_usd as string)).toBe(true);
  });

  it('keys II: an inference-only key is refused management, its daily budget and its rate limit, and its rotated predecessor expires', async () => {
    const { stdout } = await runWalkThrough(keyLimits!);
    const lines = stdout.split('\n');
    const json = lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    const [introspection, scope, budget, expired, rotated] = json;
    expect(introspection).toMatchObject({
      scopes: ['inference'],
      rate_limits: { requests_per_minute: 2, tokens_per_minute: null, max_concurrent: null },
      spend: [{ period: 'day', limit_usd: '0.01', spend_usd: '0', remaining_usd: '0.01' }],
    });
    expect(scope).toEqual({ code: 'insufficient_scope', metadata: { required_scope: 'read' } });
    expect(budget).toMatchObject({ code: 'spend_cap_exceeded', metadata: { scope: 'key', period: 'day', cap_usd: '0.01' } });
    // Two requests a minute: whatever the budget's refusal counted, the third of the loop is over the limit.
    const codes = lines.filter((line) => /^\d{3}$/.test(line));
    expect(codes.at(-1)).toBe('429');
    expect(codes.filter((code) => code === '200').length).toBeGreaterThanOrEqual(1);
    expect(stdout).toMatch(/^retry-after: \d+$/im);
    expect(stdout).toMatch(/^x-ratelimit-limit-requests: 2$/im);
    expect(stdout).toMatch(/^x-ratelimit-remaining-requests: 0$/im);
    expect(expired).toEqual({ code: 'api_key_expired' });
    expect(rotated).toMatchObject({ rate_limits: { requests_per_minute: 2 } });
    expect(rotated.key_id).not.toBe(introspection.key_id);
  });

  it('usage, a generation and the audit log: the CSV by model, the generation as answered, key.created and key.revoked with their requests', async () => {
    const { stdout } = await runWalkThrough(usageAndAudit!);
    const lines = stdout.split(/\r?\n/).filter((line) => line !== '');
    // The CSV: its header, then a row per day and model that served (routing picks the model of the tier): two requests in all.
    expect(lines[0]).toBe('bucket_start,model,requests,input_tokens,output_tokens,cost_usd');
    const rows = lines.filter((line) => /^\d{4}-\d\d-\d\dT00:00:00(\.000)?Z,/.test(line));
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows.reduce((total, row) => total + Number(row.split(',')[2]), 0)).toBe(2);
    const json = lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    const [generation, ...records] = json;
    expect(generation).toMatchObject({ generation_id: expect.stringMatching(/^gen_/), status: 'completed', output_tokens: expect.any(Number) });
    expect(new Money(generation.cost_usd as string).gt(0)).toBe(true);
    // Newest first: the revocation, then the creation, each by the user, each with its request id.
    expect(records.map((record) => record.action)).toEqual(['key.revoked', 'key.created']);
    for (const record of records) {
      expect(record).toMatchObject({ outcome: 'success', actor: 'user', target: 'api_key', request_id: expect.stringMatching(/\S/) });
    }
  });

  it('the demo upstream: its models marked in /v1/models, its answers billed at the usual prices', async () => {
    const call = restClient(mesh.gatewayUrl);
    const user = await signUp(call);
    await topUp(call, user.token, '1.00');
    const created = await call('POST', '/v1/keys', { token: user.token, body: { name: 'demo' } });
    expect(created.status, created.text).toBe(201);
    const client = new OpenAI({ apiKey: created.json.full_key, baseURL: `${mesh.gatewayUrl}/v1`, maxRetries: 0 });
    const models = (await client.models.list()).data as Array<OpenAI.Model & Record<string, unknown>>;
    expect(models.every((model) => model.demo === true)).toBe(true);
    expect(models.map((model) => model.owned_by)).toEqual(['switchboard', 'switchboard', ...models.slice(2).map(() => 'switchboard-demo')]);
    // The default plan (pay as you go): the tier's list price, the catalog's with a 5 % markup.
    expect(models[0]).toMatchObject({ id: 'service/fast', tiers: ['fast'], pricing: { input_usd_per_1m: '0.1', output_usd_per_1m: '0.4' } });
    expect(models.find((model) => model.id === 'gpt-4o-mini')).toMatchObject({
      region: 'overseas',
      tiers: ['fast'],
      pricing: { input_usd_per_1m: '0.1575', output_usd_per_1m: '0.63' },
    });

    // Passthrough, cut at max_tokens: 2 prompt tokens (a token per 4 characters), 5 words.
    const completion = await client.chat.completions.create({ model: 'qwen-max', messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 5 });
    expect(completion.choices[0].message.content).toBe("This is Switchboard's demo upstream,");
    expect(completion.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 5 });
    // (2 × 1.60 + 5 × 6.40) / 1M, plus 5 %.
    expect((completion as unknown as { service: { cost_usd: string } }).service).toMatchObject({ tier: 'passthrough', region: 'cn', cost_usd: '0.00003696' });

    // A stream through a tier: a chunk per word, the usage, then the service facts; billed at the tier's price.
    const stream = await client.chat.completions.create({
      model: 'service/balanced',
      messages: [{ role: 'user', content: 'Say hi' }],
      max_tokens: 4,
      stream: true,
    });
    let text = '';
    const chunks: Array<OpenAI.ChatCompletionChunk & { service?: { cost_usd: string } }> = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    expect(text).toBe("This is Switchboard's demo");
    expect(chunks.find((chunk) => chunk.usage)?.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 4 });
    // (2 × 0.50 + 4 × 2.00) / 1M.
    expect(chunks.at(-1)?.service).toMatchObject({ tier: 'balanced', cost_usd: '0.000009' });

    // Billed like any completion: the balance goes down by the two costs.
    await eventually(
      async () =>
        new Money((await call('GET', '/v1/billing/balance', { token: user.token })).json.balance_usd).eq(new Money('1').minus('0.00003696').minus('0.000009')),
      'the balance to be debited',
      15_000,
    );
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
