import { useState } from 'react';
import { Empty } from '../components/empty';
import { LoadMore } from '../components/load-more';
import { Loaded } from '../components/loaded';
import { Page } from '../components/page';
import { can } from '../permissions';
import { useSignedIn } from '../session';
import { useLoad } from '../use-load';
import { usePages } from '../use-pages';
import { type AuditFilter, AuditFilters } from './audit/audit-filters';
import { AuditTable } from './audit/audit-table';

const pageSize = 25;

/**
 * The workspace's audit log (`GET /v1/audit-events`, owners and admins): who did what, to what,
 * from where, how it ended, newest first, a page at a time, narrowed by action, actor and time.
 */
export function AuditPage() {
  const { client, account, workspace, role } = useSignedIn();
  const [filter, setFilter] = useState<AuditFilter>({});
  const events = usePages((after) => client.get('/v1/audit-events', { params: { query: { limit: pageSize, after, ...filter } } }), [client, filter]);

  // Names for the ids of actors: the members of an organization, the workspace's keys.
  const readsMembers = !workspace.personal && can(role, 'members.read');
  const readsKeys = can(role, 'keys.read');
  const names = useLoad(async () => {
    const [members, keys] = await Promise.all([
      readsMembers ? client.get('/v1/organizations/{org_id}/members', { params: { path: { org_id: workspace.org_id }, query: { limit: 100 } } }) : undefined,
      readsKeys ? client.get('/v1/keys', { params: { query: { limit: 100 } } }) : undefined,
    ]);
    return new Map<string, string>([
      ...(members?.data ?? []).map((member): [string, string] => [member.user_id, member.full_name || member.email]),
      ...(keys?.data ?? []).map((key): [string, string] => [key.key_id, `Key ${key.name}`]),
      [account.user_id, 'You'],
    ]);
  }, [client, readsMembers, readsKeys, workspace.org_id, account.user_id]);

  // A new filter is tried first (a 400 shows at the input it names), then the list starts again with it.
  const apply = async (next: AuditFilter) => {
    await client.get('/v1/audit-events', { params: { query: { limit: 1, ...next } } });
    setFilter(next);
  };

  return (
    <Page title="Audit log">
      <p>
        What happened in {workspace.name}, newest first: sign-ins, keys, members, webhooks, payments and refused requests, with who did it, from which address
        and the request id. Records are kept for at least a year and never change.
      </p>
      <AuditFilters apply={apply} />
      <Loaded state={events} what="Loading the audit log">
        {(list) =>
          list.length === 0 ? (
            <Empty title="No records">
              <p>{Object.values(filter).some(Boolean) ? 'Nothing matches these filters.' : 'Actions in this workspace are recorded here within a second.'}</p>
            </Empty>
          ) : (
            <AuditTable events={list} names={names.status === 'done' ? names.data : new Map()} />
          )
        }
      </Loaded>
      <LoadMore pages={events} what="records" />
    </Page>
  );
}
