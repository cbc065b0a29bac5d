import type { Schemas } from '@switchboard/sdk';
import { SwitchboardError } from '@switchboard/sdk';
import { useEffect, useRef, useState } from 'react';
import { Form } from '../../components/form';
import { Notice } from '../../components/notice';
import { Section } from '../../components/section';
import { formatDateTime } from '../../format';
import { saveFile } from '../../save-file';
import { useSignedIn } from '../../session';

type DataExport = Schemas['switchboard.identity.v1.DataExport'];
/**
 * The export as shown: its record, or `failed`, which only its download's 410 `export_failed` says.
 * Opened from the mail's link, only its id is known until the download answers.
 */
type ShownExport = Pick<DataExport, 'export_id'> & Partial<Omit<DataExport, 'export_id' | 'status'>> & { status?: DataExport['status'] | 'failed' };

const statusBadges: Record<string, { label: string; badge: string }> = {
  pending: { label: 'Being prepared', badge: 'badge warn' },
  ready: { label: 'Ready', badge: 'badge ok' },
  expired: { label: 'Expired', badge: 'badge muted' },
  failed: { label: 'Failed', badge: 'badge bad' },
};

/**
 * "Export my data" (GDPR): asks for a copy of everything held about the account. It is built in
 * the background and a link to this page is mailed (`/account/exports/{id}`: `exportId`); from
 * here it is downloaded with this session once it is ready (`GET /v1/account/exports/{id}`
 * answers 202 while it is being built), as the API route needs credentials a mail's link lacks.
 */
export function ExportSection({ exportId }: { exportId?: string }) {
  const { client, account } = useSignedIn();
  const [requested, setRequested] = useState<ShownExport | undefined>(exportId ? { export_id: exportId } : undefined);
  const [requestedHere, setRequestedHere] = useState(false);
  const [stillPending, setStillPending] = useState(false);
  const [downloaded, setDownloaded] = useState(false);
  const facts = useRef<HTMLDListElement>(null);
  // Opened from the mail: the export is the reason of the visit, further down the account page.
  useEffect(() => {
    if (exportId) facts.current?.scrollIntoView({ block: 'center' });
  }, [exportId]);

  const request = async () => {
    setStillPending(false);
    setDownloaded(false);
    setRequested(await client.post('/v1/account/export', { body: {} }));
    setRequestedHere(true);
  };

  const download = async () => {
    if (!requested) return;
    setStillPending(false);
    setDownloaded(false);
    const { data, error, response } = await client.raw.GET('/v1/account/exports/{export_id}', {
      params: { path: { export_id: requested.export_id } },
      parseAs: 'text',
    });
    if (!response.ok) {
      const failure = SwitchboardError.fromResponse(response, error);
      // 410: the link expired, or the export could not be built; the message says which.
      if (failure.status === 410) setRequested({ ...requested, status: failure.code === 'export_failed' ? 'failed' : 'expired' });
      throw failure;
    }
    if (response.status === 202) {
      // Still being built: the body is `{export_id, status}`.
      const state = JSON.parse(data ?? '{}') as Partial<DataExport>;
      setRequested({ ...requested, status: state.status ?? 'pending' });
      setStillPending(true);
      return;
    }
    saveFile(`switchboard-export-${requested.export_id}.json`, data ?? '', 'application/json');
    setRequested({ ...requested, status: 'ready' });
    setDownloaded(true);
  };

  const status = requested?.status ? (statusBadges[requested.status] ?? { label: requested.status, badge: 'badge' }) : undefined;
  return (
    <Section title="Export my data">
      <p>
        A copy of everything Switchboard holds about you, as one JSON file: your account, sessions, memberships, invitations, the keys you created (never a
        secret), the conversations, messages and feedback of your personal workspace, and the audit records about you.
      </p>
      <Form onSubmit={request} submitLabel="Export my data" busyLabel="Requesting…" label="Export my data">
        <p className="hint">It is prepared in the background; a link to download it is mailed to {account.email} and works for 7 days.</p>
      </Form>
      {requested && (
        <>
          {requestedHere ? (
            <Notice>Your export is requested. A link to download it will be mailed to {account.email} when it is ready.</Notice>
          ) : (
            <Notice>The export of the mail you received: download it below.</Notice>
          )}
          <dl className="facts" data-testid="data-export" ref={facts}>
            <dt>Export id</dt>
            <dd>
              <code>{requested.export_id}</code>
            </dd>
            {status && (
              <>
                <dt>Status</dt>
                <dd>
                  <span className={status.badge}>{status.label}</span>
                </dd>
              </>
            )}
            {requested.created_at && (
              <>
                <dt>Requested</dt>
                <dd>{formatDateTime(requested.created_at)}</dd>
              </>
            )}
            {requested.expires_at && (
              <>
                <dt>Link expires</dt>
                <dd>{formatDateTime(requested.expires_at)}</dd>
              </>
            )}
          </dl>
          {/* Kept after a 410: its error says why there is nothing to download. */}
          <Form onSubmit={download} submitLabel="Download the export" busyLabel="Checking…" label="Download the export">
            <p className="hint">Saves the file here, with this session, once it is ready.</p>
          </Form>
          {stillPending && <Notice>The export is still being prepared. Try again in a moment, or wait for the mail.</Notice>}
          {downloaded && <Notice>The export is saved.</Notice>}
        </>
      )}
    </Section>
  );
}
