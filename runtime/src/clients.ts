import { createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { DescService } from '@bufbuild/protobuf';
import type { MeshClaims, MeshTokens } from './mesh-token.js';

/**
 * An HTTP/2 Connect transport to a peer. Pings keep the session honest across peer restarts
 * (connect-es #1561), and every call has a deadline.
 */
export function createPeerTransport(baseUrl: string, options: { interceptors?: Interceptor[]; timeoutMs?: number } = {}): Transport {
  return createConnectTransport({
    baseUrl,
    httpVersion: process.env.PEER_HTTP === '1.1' ? '1.1' : '2',
    useBinaryFormat: true,
    pingIntervalMs: 5_000,
    pingTimeoutMs: 3_000,
    idleConnectionTimeoutMs: 60_000,
    defaultTimeoutMs: options.timeoutMs ?? 10_000,
    interceptors: options.interceptors,
  });
}

/** A client for a peer service whose calls carry a mesh token naming this component. */
export function createPeerClient<T extends DescService>(
  service: T,
  target: { name: string; url: string },
  meshTokens: MeshTokens,
  claims: MeshClaims,
): Client<T> {
  const addToken: Interceptor = (next) => async (req) => {
    req.header.set('authorization', `Bearer ${await meshTokens.mint(target.name, claims)}`);
    return next(req);
  };
  return createClient(service, createPeerTransport(target.url, { interceptors: [addToken] }));
}
