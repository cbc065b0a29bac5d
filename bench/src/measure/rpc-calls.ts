/** `rpc_server_duration_seconds_count{…rpc="Service/Method"…} <count>`: one series per RPC and outcome. */
const rpcCountLine = /^rpc_server_duration_seconds_count\{[^}]*\brpc="([^"]+)"[^}]*\}\s+(\S+)$/;

/**
 * The RPCs the mesh served so far, by `Service/Method`, summed over outcomes and components:
 * the count of each RPC server's duration histogram (runtime/src/server.ts) on every component's
 * /metrics. Health checks are not counted there; the scrapes themselves are no RPCs.
 */
export async function rpcCalls(metricsUrls: Record<string, string>): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const [component, url] of Object.entries(metricsUrls)) {
    const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
    if (response.status !== 200) throw new Error(`GET ${url} (${component}'s metrics) answered ${response.status}`);
    for (const line of (await response.text()).split('\n')) {
      const match = rpcCountLine.exec(line);
      if (match) calls[match[1]] = (calls[match[1]] ?? 0) + Number(match[2]);
    }
  }
  return calls;
}

/** The RPCs served between two readings, per unit of work: in all, and by RPC (most first, those that moved). */
export function rpcCallsPer(before: Record<string, number>, after: Record<string, number>, units: number) {
  const per = (count: number) => (units > 0 ? Math.round((count / units) * 1000) / 1000 : 0);
  const moved = Object.entries(after)
    .map(([rpc, count]) => [rpc, count - (before[rpc] ?? 0)] as const)
    .filter(([, count]) => count > 0)
    .sort((a, b) => b[1] - a[1]);
  return {
    total: per(moved.reduce((sum, [, count]) => sum + count, 0)),
    byRpc: Object.fromEntries(moved.map(([rpc, count]) => [rpc, per(count)])),
    calls: Object.fromEntries(moved),
  };
}
