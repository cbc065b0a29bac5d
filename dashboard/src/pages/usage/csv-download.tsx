import { useState } from 'react';
import { ErrorMessage } from '../../components/error-message';
import { saveFile } from '../../save-file';
import { useSignedIn } from '../../session';
import type { UsageGroupBy } from './usage-groups';
import { type Bucket, csvFilename } from './usage-range';

/**
 * "Download CSV": the same report as the page shows (`format=csv`), fetched with the session and
 * saved as a file. The API writes the CSV: the file holds exactly its rows and header.
 */
export function CsvDownload({ range, groupBy }: { range: { start: string; end: string; bucket: Bucket }; groupBy: UsageGroupBy }) {
  const { client } = useSignedIn();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const download = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const csv = await client.get('/v1/usage', { params: { query: { ...range, group_by: groupBy, format: 'csv' } }, parseAs: 'text' });
      saveFile(csvFilename(groupBy, range.start, range.end), csv, 'text/csv');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" className="button" onClick={() => void download()} disabled={busy} aria-busy={busy}>
        {busy ? 'Preparing the CSV…' : 'Download CSV'}
      </button>
      {error !== undefined && <ErrorMessage error={error} />}
    </>
  );
}
