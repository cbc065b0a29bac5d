import type pg from 'pg';
import type { Prepared } from './gateway-calls.js';
import type { LoadSummary, Loads } from './loads.js';
import { conversations, listMessages } from './settings.js';

/** Every conversation's messages at positions 1..message_count: no gap, no duplicate, no fewer than answered 201. */
async function checkMessages(db: pg.Client, minimum: Map<string, number>): Promise<{ problems: string[]; stored: Record<string, number> }> {
  const { rows } = await db.query<{ id: string; message_count: string; rows: string; distinct_positions: string; min: string | null; max: string | null }>(
    `SELECT c.id, c.message_count::text, count(m.id)::text AS rows, count(DISTINCT m.position)::text AS distinct_positions,
            min(m.position)::text AS min, max(m.position)::text AS max
       FROM conversations.conversations c LEFT JOIN conversations.messages m ON m.conversation_id = c.id
      WHERE c.id = ANY($1) GROUP BY c.id, c.message_count`,
    [[...minimum.keys()]],
  );
  const problems: string[] = [];
  const stored: Record<string, number> = {};
  for (const [id, least] of minimum) {
    const row = rows.find((r) => r.id === id);
    if (!row) {
      problems.push(`conversation ${id} is gone`);
      continue;
    }
    const count = Number(row.rows);
    stored[id] = count;
    const contiguous = count === 0 || (row.min === '1' && row.max === row.message_count && row.distinct_positions === row.rows);
    if (!contiguous || row.message_count !== row.rows)
      problems.push(
        `conversation ${id}: ${row.rows} messages (${row.distinct_positions} positions, ${row.min}..${row.max}), message_count ${row.message_count}`,
      );
    if (count < least) problems.push(`conversation ${id}: ${count} messages stored, fewer than the ${least} appends answered 201`);
  }
  return { problems, stored };
}

/** Every request of the loads a 2xx, and the tables hold every message answered 201 (checkMessages). */
export async function checkConversations(db: pg.Client, prepared: Prepared, loads: Loads): Promise<{ errors: string[]; stored: Record<string, number> }> {
  const { one, many, list } = loads;
  const { appendTo, listed } = prepared;
  const errors: string[] = [];
  for (const [name, s] of [
    ['append, 1 conversation', one],
    [`append, ${conversations} conversations`, many],
    ['list', list],
  ] as const) {
    if (s.non2xx + s.errors + s.timeouts > 0)
      errors.push(`${name}: ${s.non2xx} non-2xx (${JSON.stringify(s.statusCodes)}), ${s.errors} errors, ${s.timeouts} timeouts`);
  }
  // Lower bounds of what each conversation must hold (the warm-up's appends are not counted by autocannon).
  const answered = (s: LoadSummary) => s.statusCodes['201'] ?? 0;
  const minimum = new Map<string, number>(appendTo.map((id) => [id, 0]));
  minimum.set(appendTo[0], answered(one));
  minimum.set(listed, listMessages);
  const { problems, stored } = await checkMessages(db, minimum);
  errors.push(...problems);
  const storedInAppended = appendTo.reduce((sum, id) => sum + (stored[id] ?? 0), 0);
  if (storedInAppended < answered(one) + answered(many))
    errors.push(`${answered(one) + answered(many)} appends answered 201, but the conversations appended to hold ${storedInAppended} messages`);
  if ((stored[listed] ?? 0) !== listMessages) errors.push(`the listed conversation holds ${stored[listed]} messages, not ${listMessages}`);
  return { errors, stored };
}
