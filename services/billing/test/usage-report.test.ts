import { randomBytes } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { csvField, plainSum } from '@switchboard/billing/usage-report';
import { UsageService } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { OpenAiUpstream } from '@switchboard/runtime/dev/openai-upstream';
import { Money } from '@switchboard/runtime/money';
import { eventually, meshClient } from '@switchboard/runtime/testing';
import { Mailbox } from '@switchboard/testkit/mailbox';
import { type ApiResponse, expectErrorBody, meshSuiteOfFile, type SignedUp, signUp, topUp } from '@switchboard/testkit/mesh';
import { catalogModel, type TestCatalog, writeTestCatalog } from '@switchboard/testkit/model-catalog-file';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * GET /v1/usage (docs/api/billing.md#usage-analytics) after mixed traffic through the front door
 * (the openai client at the gateway: three keys of an organization, two fast models in two
 * regions, a balanced one and a passthrough one, streamed and not) and usage of earlier days
 * through RecordUsage: every group_by combination sums exactly to GET /v1/billing/usage for the
 * same days, hour buckets to day buckets, the CSV parses back to the JSON, every bad parameter
 * is a 400 naming it, another workspace's key shows nothing, and a developer reads it all.
 */

const tag = randomBytes(3).toString('hex');
const FAST_A = `ur-fast-a-${tag}`;
const FAST_CN = `ur-fast-cn-${tag}`;
const BIG = `ur-big-${tag}`;
const PASS = `ur-pass-${tag}`;

let overseas: OpenAiUpstream;
let cn: OpenAiUpstream;
let catalog: TestCatalog | undefined;

const suite = meshSuiteOfFile(async () => {
  [overseas, cn] = await Promise.all([OpenAiUpstream.start(), OpenAiUpstream.start()]);
  catalog = await writeTestCatalog({ overseas, cn }, [
    catalogModel(FAST_A, 'overseas', ['fast']),
    catalogModel(FAST_CN, 'cn', ['fast']),
    catalogModel(BIG, 'overseas', ['balanced'], '2.50', '10.00'),
    catalogModel(PASS, 'overseas', [], '1.00', '2.00'),
  ]);
  return { ...catalog.env, ROUTING_SEED: '5' };
});

afterAll(async () => {
  await Promise.all([overseas?.close(), cn?.close()]);
  await catalog?.remove();
});

const dayMs = 24 * 3_600_000;
const today = new Date(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
const dayIso = (offset: number) => new Date(today.getTime() + offset * dayMs).toISOString().replace('.000Z', 'Z');
/** The three days of the test's usage (two days ago, yesterday, today), as the report's range. */
const range = `start=${dayIso(-2)}&end=${dayIso(1)}`;

let owner: SignedUp;
let developer: SignedUp;
let outsider: SignedUp;
let orgId: string;
let keyIds: string[];
let outsiderKeyId: string;
/** The requests sent to the organization, and to the outsider's workspace. */
let sent = 0;
let outsiderSent = 0;

const inOrg = { 'x-workspace-id': '' };
const get = (pathname: string, token = owner.token, headers: Record<string, string> = inOrg): Promise<ApiResponse> =>
  suite.call('GET', pathname, { token, headers });

async function createKey(token: string, headers?: Record<string, string>): Promise<{ keyId: string; client: OpenAI }> {
  const created = await suite.call('POST', '/v1/keys', { token, headers, body: { name: 'usage report' } });
  expect(created.status, created.text).toBe(201);
  return {
    keyId: created.json.key.key_id,
    client: new OpenAI({ apiKey: created.json.full_key, baseURL: `${suite.mesh.gatewayUrl}/v1`, maxRetries: 0 }),
  };
}

async function chat(client: OpenAI, model: string, stream: boolean): Promise<void> {
  const body = { model, messages: [{ role: 'user' as const, content: `Say hi ${randomBytes(2).toString('hex')}` }], max_tokens: 8 };
  if (stream) {
    const chunks = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    for await (const _ of chunks) {
      // read to the end
    }
  } else {
    await client.chat.completions.create(body);
  }
}

beforeAll(async () => {
  const mailbox = new Mailbox(suite.mesh.env.MAILBOX_DIR);
  [owner, developer, outsider] = [await signUp(suite.call), await signUp(suite.call), await signUp(suite.call)];
  const name = `Usage ${tag}`;
  const created = await suite.call('POST', '/v1/organizations', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  orgId = created.json.organization.org_id;
  inOrg['x-workspace-id'] = orgId;
  const invited = await suite.call('POST', `/v1/organizations/${orgId}/invitations`, {
    token: owner.token,
    body: { email: developer.email, role: 'developer' },
  });
  expect(invited.status, invited.text).toBe(201);
  const accepted = await suite.call('POST', '/v1/invitations/accept', {
    token: developer.token,
    body: { token: await mailbox.invitationToken(developer.email, name) },
  });
  expect(accepted.status, accepted.text).toBe(200);
  await topUp(suite.call, owner.token, '20.00', orgId);

  const keys = [await createKey(owner.token, inOrg), await createKey(owner.token, inOrg), await createKey(owner.token, inOrg)];
  keyIds = keys.map((key) => key.keyId);
  const theirs = await createKey(outsider.token);
  outsiderKeyId = theirs.keyId;
  await eventually(async () => (await get('/v1/billing/balance')).json?.balance_usd !== '0', 'the top-up');

  // Today, through the front door: every key, every model, streamed and not.
  const calls: Array<Promise<void>> = [];
  for (const [i, key] of keys.entries()) {
    for (const model of ['service/fast', 'service/fast', 'service/fast', 'service/balanced', PASS]) {
      calls.push(chat(key.client, model, (calls.length + i) % 2 === 0));
    }
  }
  calls.push(chat(theirs.client, 'service/fast', false), chat(theirs.client, PASS, true));
  await Promise.all(calls);
  sent = keys.length * 5;
  outsiderSent = 2;

  // Earlier days, through RecordUsage (the other path that records usage), across a midnight.
  const usage = meshClient(UsageService, suite.mesh.urls.billing, 'billing', { caller: 'data-plane' });
  const earlier = [
    { keyId: keyIds[0], model: 'service/fast', at: today.getTime() - 2 * dayMs + 5 * 3_600_000 },
    { keyId: keyIds[1], model: 'service/balanced', at: today.getTime() - dayMs - 60_000 },
    { keyId: keyIds[1], model: 'service/balanced', at: today.getTime() - dayMs },
    { keyId: keyIds[2], model: 'service/fast', at: today.getTime() - dayMs + 3_600_000 },
    // The same day and group, another hour.
    { keyId: keyIds[2], model: 'service/fast', at: today.getTime() - dayMs + 5 * 3_600_000 + 1 },
  ];
  for (const [i, item] of earlier.entries()) {
    await usage.recordUsage({
      generationId: `gen_ur${tag}${i}`,
      keyId: item.keyId,
      workspaceId: orgId,
      model: item.model,
      inputTokens: BigInt(100 + i),
      outputTokens: BigInt(7 * i),
      occurredAt: timestampFromDate(new Date(item.at)),
    });
  }
  sent += earlier.length;
  // The data plane publishes its usage after answering: wait until billing has settled all of it.
  await eventually(async () => {
    const days = (await get('/v1/billing/usage?days=3')).json.data as Array<{ requests: number }>;
    return days.reduce((sum, day) => sum + Number(day.requests), 0) === sent;
  }, 'every request settled');
  await eventually(
    async () => Number((await get('/v1/billing/usage?days=1', outsider.token, {})).json.data[0].requests) === outsiderSent,
    "the outsider's requests settled",
  );
});

interface Row {
  bucket_start: string;
  key_id?: string;
  model?: string;
  tier?: string;
  region?: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: string;
}

const groupNames = ['key', 'model', 'tier', 'region'] as const;
const groupColumns = { key: 'key_id', model: 'model', tier: 'tier', region: 'region' } as const;
/** Every subset of the group names, the empty one included. */
const subsets = Array.from({ length: 16 }, (_, mask) => groupNames.filter((_, bit) => mask & (1 << bit)));

interface Totals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cost: Money;
}

function totalsBy(rows: Row[], keyOf: (row: Row) => string): Map<string, Totals> {
  const totals = new Map<string, Totals>();
  for (const row of rows) {
    const total = totals.get(keyOf(row)) ?? { requests: 0, input_tokens: 0, output_tokens: 0, cost: new Money(0) };
    total.requests += Number(row.requests);
    total.input_tokens += Number(row.input_tokens);
    total.output_tokens += Number(row.output_tokens);
    total.cost = total.cost.plus(row.cost_usd);
    totals.set(keyOf(row), total);
  }
  return totals;
}

const plain = (totals: Map<string, Totals>) =>
  Object.fromEntries([...totals].map(([key, total]) => [key, { ...total, cost: total.cost.toFixed() }]).sort(([a], [b]) => (a < b ? -1 : 1)));

/** RFC 4180: fields separated by commas, records by CRLF, a quoted field may hold commas, CRLF and doubled quotes. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let i = 0;
  while (i < text.length) {
    if (text[i] === '"' && field === '') {
      i++;
      for (;;) {
        if (i >= text.length) throw new Error('unterminated quoted field');
        if (text[i] === '"' && text[i + 1] === '"') {
          field += '"';
          i += 2;
        } else if (text[i] === '"') {
          i++;
          break;
        } else field += text[i++];
      }
    } else if (text[i] === ',') {
      record.push(field);
      field = '';
      i++;
    } else if (text.startsWith('\r\n', i)) {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      i += 2;
    } else field += text[i++];
  }
  if (field !== '' || record.length > 0) throw new Error('the last record has no CRLF');
  return records;
}

describe('GET /v1/usage', () => {
  it('sums exactly to the billing totals of the same days by every group_by combination, in bucket then group order', async () => {
    const billing = (await get('/v1/billing/usage?days=3')).json.data as Array<{
      date: string;
      requests: number;
      input_tokens: number;
      output_tokens: number;
      cost_usd: string;
    }>;
    const expected = Object.fromEntries(
      billing
        .filter((day) => Number(day.requests) > 0)
        .map((day) => [
          `${day.date}T00:00:00Z`,
          {
            requests: Number(day.requests),
            input_tokens: Number(day.input_tokens),
            output_tokens: Number(day.output_tokens),
            cost: new Money(day.cost_usd).toFixed(),
          },
        ]),
    );
    expect(Object.keys(expected)).toHaveLength(3);
    for (const subset of subsets) {
      const response = await get(`/v1/usage?${range}&group_by=${subset.join(',')}`);
      expect(response.status, response.text).toBe(200);
      expect(response.json).toMatchObject({ start: dayIso(-2), end: dayIso(1), bucket: 'day' });
      const rows = response.json.data as Row[];
      expect(plain(totalsBy(rows, (row) => row.bucket_start)), subset.join(',')).toEqual(expected);
      const columns = subset.map((name) => groupColumns[name]);
      const order = (row: Row) => [row.bucket_start, ...columns.map((column) => row[column] as string)];
      for (const row of rows) {
        expect(Object.keys(row).sort()).toEqual(['bucket_start', ...columns, 'requests', 'input_tokens', 'output_tokens', 'cost_usd'].sort());
        expect(Number(row.requests)).toBeGreaterThan(0);
      }
      const keys = rows.map((row) => JSON.stringify(order(row)));
      expect(new Set(keys).size, 'one row per bucket and group').toBe(rows.length);
      const sorted = [...rows].sort((a, b) => {
        const [x, y] = [order(a), order(b)];
        for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
        return 0;
      });
      expect(rows).toEqual(sorted);
    }
    // What was sent shows: the three keys, the models that served, the tiers and the regions.
    const all = (await get(`/v1/usage?${range}&group_by=key,model,tier,region`)).json.data as Row[];
    expect(new Set(all.map((row) => row.key_id))).toEqual(new Set(keyIds));
    expect(new Set(all.map((row) => row.tier))).toEqual(new Set(['fast', 'balanced', 'passthrough']));
    expect(all.some((row) => row.model === BIG && row.region === 'overseas')).toBe(true);
    expect(all.some((row) => row.model === PASS && row.tier === 'passthrough')).toBe(true);
    // RecordUsage's rows: the model asked for (no routed model), no region.
    expect(all.some((row) => row.model === 'service/balanced' && row.region === '' && row.bucket_start === dayIso(-1))).toBe(true);
  });

  it('has hour buckets that sum to the day buckets', async () => {
    const groups = 'key,model,tier,region';
    const days = (await get(`/v1/usage?${range}&group_by=${groups}`)).json.data as Row[];
    const hours = await get(`/v1/usage?${range}&group_by=${groups}&bucket=hour`);
    expect(hours.json).toMatchObject({ bucket: 'hour', start: dayIso(-2), end: dayIso(1) });
    const hourRows = hours.json.data as Row[];
    for (const row of hourRows) expect(row.bucket_start).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:00:00Z$/);
    const groupKey = (row: Row) => JSON.stringify([`${row.bucket_start.slice(0, 10)}T00:00:00Z`, row.key_id, row.model, row.tier, row.region]);
    expect(hourRows.length).toBeGreaterThan(days.length);
    expect(plain(totalsBy(hourRows, groupKey))).toEqual(plain(totalsBy(days, groupKey)));
  });

  it('answers CSV that parses back to exactly the JSON', async () => {
    for (const groups of ['key,model,tier,region', 'model', '']) {
      const json = (await get(`/v1/usage?${range}&group_by=${groups}`)).json.data as Row[];
      const csv = await get(`/v1/usage?${range}&group_by=${groups}&format=csv`);
      expect(csv.status, csv.text).toBe(200);
      expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      const columns = groups === '' ? [] : groups.split(',').map((name) => groupColumns[name as keyof typeof groupColumns]);
      const [header, ...records] = parseCsv(csv.text);
      expect(header).toEqual(['bucket_start', ...columns, 'requests', 'input_tokens', 'output_tokens', 'cost_usd']);
      const parsed = records.map((record) => {
        const row = Object.fromEntries(header.map((name, i) => [name, record[i]]));
        for (const number of ['requests', 'input_tokens', 'output_tokens']) row[number] = Number(row[number]) as unknown as string;
        return row;
      });
      expect(parsed).toEqual(
        json.map((row) => ({ ...row, requests: Number(row.requests), input_tokens: Number(row.input_tokens), output_tokens: Number(row.output_tokens) })),
      );
      expect(parsed.length).toBeGreaterThan(0);
    }
  });

  it('refuses each bad parameter with a 400 naming it', async () => {
    const cases: Array<[string, string]> = [
      ['group_by=key,user', 'group_by'],
      ['group_by=key,,model', 'group_by'],
      ['group_by=model,model', 'group_by'],
      ['bucket=week', 'bucket'],
      ['start=yesterday', 'start'],
      ['start=2026-11-01', 'start'],
      ['end=2026-02-30T00:00:00Z', 'end'],
      [`start=${dayIso(0)}&end=${dayIso(-1)}`, 'start'],
      [`start=${dayIso(-367)}&end=${dayIso(0)}`, 'start'],
      [`start=${dayIso(-32)}&end=${dayIso(0)}&bucket=hour`, 'start'],
      ['format=xml', 'format'],
      [`key_id=${'k'.repeat(201)}`, 'key_id'],
    ];
    for (const [query, field] of cases) expectErrorBody(await get(`/v1/usage?${query}`), 400, 'invalid_request', field);
    // Spaces around a name are allowed (the proto's pattern and the parser agree).
    expect((await get(`/v1/usage?${range}&group_by=${encodeURIComponent(' model , tier ')}`)).status).toBe(200);
    // At the limits: 366 days, 31 days of hours.
    expect((await get(`/v1/usage?start=${dayIso(-366)}&end=${dayIso(0)}`)).status).toBe(200);
    expect((await get(`/v1/usage?start=${dayIso(-31)}&end=${dayIso(0)}&bucket=hour`)).status).toBe(200);
  });

  it("filters by key, and shows nothing of another workspace's key", async () => {
    const one = (await get(`/v1/usage?${range}&key_id=${keyIds[1]}&group_by=key`)).json.data as Row[];
    expect(one.length).toBeGreaterThan(0);
    expect(new Set(one.map((row) => row.key_id))).toEqual(new Set([keyIds[1]]));
    expect((await get(`/v1/usage?${range}&key_id=${outsiderKeyId}&group_by=key`)).json.data).toEqual([]);
    // The outsider sees their own usage, and nothing of the organization's keys.
    const theirs = (await get(`/v1/usage?${range}&group_by=key`, outsider.token, {})).json.data as Row[];
    expect(theirs.map((row) => row.key_id)).toEqual([outsiderKeyId]);
    expect(Number(theirs[0].requests)).toBe(outsiderSent);
    expect((await get(`/v1/usage?${range}&key_id=${keyIds[0]}`, outsider.token, {})).json.data).toEqual([]);
  });

  it('lets a developer read the usage, as the owner sees it; defaults to the last 30 days of day buckets', async () => {
    const query = `/v1/usage?${range}&group_by=key,model`;
    const asDeveloper = await get(query, developer.token);
    expect(asDeveloper.status, asDeveloper.text).toBe(200);
    expect(asDeveloper.json).toEqual((await get(query)).json);
    const defaults = await get('/v1/usage');
    expect(defaults.json.bucket).toBe('day');
    expect(Date.parse(defaults.json.end) - Date.parse(defaults.json.start)).toBe(31 * dayMs);
    expect(defaults.json.end).toBe(dayIso(1));
    expect((defaults.json.data as Row[]).reduce((sum, row) => sum + Number(row.requests), 0)).toBe(sent);
  });
});

describe('CSV fields', () => {
  it('quotes per RFC 4180, and keeps a spreadsheet from running a value as a formula', () => {
    expect(['key_abc', 'a,b', 'say "hi"', 'two\r\nlines', '=1+2', '+1', '-1', '@SUM(A1)', '\tx', ''].map(csvField)).toEqual([
      'key_abc',
      '"a,b"',
      '"say ""hi"""',
      '"two\r\nlines"',
      `"'=1+2"`,
      `"'+1"`,
      `"'-1"`,
      `"'@SUM(A1)"`,
      `"'\tx"`,
      '',
    ]);
  });
});

describe('sums', () => {
  it('are written in their shortest exact form, as Money writes them', () => {
    for (const sum of ['0', '0.000', '10', '10.0', '100.500', '0.000000000000000000123', '123456789012345678901234567890.10']) {
      expect(plainSum(sum), sum).toBe(new Money(sum).toFixed());
    }
  });
});
