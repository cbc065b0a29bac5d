import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { GetUsageReportRequest, UsageReportSchema } from '@switchboard/contracts/switchboard/billing/v1/billing_pb';
import { type Clock, systemClock } from '@switchboard/runtime/clock';
import type { Knex } from '@switchboard/runtime/db';
import { invalidArgument } from '@switchboard/runtime/errors';
import { Money } from '@switchboard/runtime/money';
import { timeParameter } from '@switchboard/runtime/rfc3339';
import { type Bucket, bucketStartOf, type GroupColumn, type RollupRow, readRollups } from './store/usage-rollups.js';

/**
 * Usage analytics (docs/api/billing.md#usage-analytics): requests, tokens and cost per UTC hour
 * or day, grouped by any of key, model (the model that served), tier and region, read from the
 * aggregates the settlement keeps (store/usage-rollups.ts), never from the raw usage rows. The
 * report covers whole buckets: from the bucket `start` falls in to the bucket just before `end`
 * (the answer's `start` and `end` are those bounds), so its days are the days of
 * `GET /v1/billing/usage` and the sums equal its totals. Reads wait for the usage published
 * before the call to be settled, as the balance does. `format=csv` adds the same rows as CSV.
 */

export interface UsageReportsDeps {
  db: Knex;
  clock?: Clock;
  /** Resolves once the usage the data planes published before the call is settled (docs/money-path.md#usage). */
  usageSettled?: () => Promise<unknown>;
}

type Report = MessageInitShape<typeof UsageReportSchema>;

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;
/** The longest range, and the longest of hour buckets (docs/api/billing.md#usage-analytics). */
export const maxRangeDays = 366;
export const maxHourRangeDays = 31;
const defaultRangeDays = 30;
const maxKeyIdLength = 200;
/** Rows one report may hold (a year of days for over a hundred groups): memory and the answer stay bounded. */
export const maxReportRows = 50_000;

/** group_by's names, in the order of the columns (and of the CSV). */
const groupNames = { key: 'key_id', model: 'model', tier: 'tier', region: 'region' } as const satisfies Record<string, GroupColumn>;
type GroupName = keyof typeof groupNames;
const groupOrder = Object.keys(groupNames) as GroupName[];

/**
 * `group_by`: comma-separated names of key, model, tier and region (spaces around a name
 * allowed); none is one total per bucket. A name twice is a 400 too: a typo more likely than a wish.
 */
function parseGroupBy(raw: string): GroupName[] {
  if (raw.trim() === '') return [];
  const seen = new Set<GroupName>();
  for (const part of raw.split(',')) {
    const name = part.trim();
    if (!(name in groupNames))
      throw invalidArgument('group_by', `group_by takes a comma-separated list of ${groupOrder.join(', ')}; "${name.slice(0, 40)}" is none of them.`);
    if (seen.has(name as GroupName)) throw invalidArgument('group_by', `group_by names ${name} twice.`);
    seen.add(name as GroupName);
  }
  return groupOrder.filter((name) => seen.has(name));
}

export interface UsageReportParams {
  start: Date;
  end: Date;
  bucket: Bucket;
  groupBy: GroupName[];
  keyId?: string;
  format: 'json' | 'csv';
}

/** The request's parameters checked, defaults filled in; 400 naming the parameter otherwise. */
export function parseUsageReportRequest(req: GetUsageReportRequest, now: Date): UsageReportParams {
  const bucket = req.bucket === '' ? 'day' : req.bucket;
  if (bucket !== 'hour' && bucket !== 'day') throw invalidArgument('bucket', 'bucket must be hour or day.');
  const format = req.format === '' ? 'json' : req.format;
  if (format !== 'json' && format !== 'csv') throw invalidArgument('format', 'format must be json or csv.');
  const groupBy = parseGroupBy(req.groupBy);
  if (req.keyId.length > maxKeyIdLength) throw invalidArgument('key_id', `key_id may be at most ${maxKeyIdLength} characters.`);
  const end = timeParameter(req.end, 'end') ?? now;
  const start = timeParameter(req.start, 'start') ?? new Date(end.getTime() - defaultRangeDays * dayMs);
  if (start.getTime() > end.getTime()) throw invalidArgument('start', 'start must not be after end.');
  const range = end.getTime() - start.getTime();
  if (range > maxRangeDays * dayMs) throw invalidArgument('start', `The range from start to end may be at most ${maxRangeDays} days.`);
  if (bucket === 'hour' && range > maxHourRangeDays * dayMs) {
    throw invalidArgument('start', `With hour buckets the range from start to end may be at most ${maxHourRangeDays} days.`);
  }
  return { start, end, bucket, groupBy, keyId: req.keyId === '' ? undefined : req.keyId, format };
}

/** The first bucket start at or after `at`. */
function bucketEndOf(at: Date, bucket: Bucket): Date {
  const floor = bucketStartOf(at, bucket);
  return floor.getTime() === at.getTime() ? floor : new Date(floor.getTime() + (bucket === 'hour' ? hourMs : dayMs));
}

/**
 * A sum as Postgres writes a `numeric` (plain notation, never an exponent) in its shortest form,
 * as Money.toFixed() would give it ("0.30" → "0.3", "2.000" → "2"), without a decimal per row.
 */
export function plainSum(text: string): string {
  if (!/^\d+(\.\d+)?$/.test(text)) return new Money(text).toFixed();
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/**
 * A CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF (quotes doubled). A text
 * that a spreadsheet would run as a formula (starting with =, +, -, @, a tab or CR) gets a leading
 * apostrophe and quotes (the OWASP advice); numbers, amounts and times are ours and never start so.
 */
export function csvField(value: string): string {
  const formula = /^[=+\-@\t\r]/.test(value);
  const text = formula ? `'${value}` : value;
  return formula || /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export class UsageReports {
  constructor(private readonly deps: UsageReportsDeps) {}

  async report(workspaceId: string, req: GetUsageReportRequest): Promise<Report> {
    const params = parseUsageReportRequest(req, (this.deps.clock ?? systemClock)());
    const from = bucketStartOf(params.start, params.bucket);
    const to = bucketEndOf(params.end, params.bucket);
    await this.deps.usageSettled?.();
    const rows = await readRollups(this.deps.db, {
      workspaceId,
      bucket: params.bucket,
      from,
      to,
      groupBy: params.groupBy.map((name) => groupNames[name]),
      keyId: params.keyId,
      limit: maxReportRows + 1,
    });
    if (rows.length > maxReportRows) {
      throw invalidArgument('group_by', `The report would hold more than ${maxReportRows} rows: narrow the range, group by fewer fields, or filter by key_id.`);
    }
    const report: Report = { start: timestampFromDate(from), end: timestampFromDate(to), bucket: params.bucket, data: [] };
    if (params.format === 'csv') {
      // The CSV instead of the rows (the gateway answers it as the body).
      report.csv = { contentType: 'text/csv; charset=utf-8', data: Buffer.from(toCsv(params.groupBy, rows), 'utf8') };
      return report;
    }
    report.data = rows.map((row) => ({
      bucketStart: { seconds: BigInt(row.bucket_epoch), nanos: 0 },
      keyId: row.key_id,
      model: row.model,
      tier: row.tier,
      region: row.region,
      requests: BigInt(row.requests),
      inputTokens: BigInt(row.input_tokens),
      outputTokens: BigInt(row.output_tokens),
      costUsd: plainSum(row.cost_usd),
    }));
    return report;
  }
}

/** The header row then a row per report row, CRLF-terminated (RFC 4180). */
function toCsv(groupBy: GroupName[], rows: RollupRow[]): string {
  const columns = groupBy.map((name) => groupNames[name]);
  const lines = [['bucket_start', ...columns, 'requests', 'input_tokens', 'output_tokens', 'cost_usd'].join(',')];
  for (const row of rows) {
    const groups = columns.map((column) => csvField(row[column] ?? ''));
    lines.push([row.bucket_iso, ...groups, row.requests, row.input_tokens, row.output_tokens, plainSum(row.cost_usd)].join(','));
  }
  return `${lines.map((line) => `${line}\r\n`).join('')}`;
}
