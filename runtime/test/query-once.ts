import pg from 'pg';

/** The rows of one statement, run on a connection of its own that is closed before this returns (so the server can stop). */
export async function queryOnce(url: string, sql: string): Promise<Record<string, unknown>[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}
