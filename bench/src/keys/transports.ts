import type { Interceptor, Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, type Http2SessionManager } from '@connectrpc/connect-node';

export interface TransportKind {
  name: string;
  /** Which server path answers each RPC (runtime/src/server.ts, fast-unary.ts). */
  path: string;
  make(baseUrl: string, sessionManager: Http2SessionManager, interceptors: Interceptor[]): Transport;
}

export const transports: TransportKind[] = [
  {
    name: 'gRPC',
    path: 'both RPCs: connect-node handler',
    make: (baseUrl, sessionManager, interceptors) => createGrpcTransport({ baseUrl, sessionManager, interceptors }),
  },
  {
    name: 'Connect binary',
    path: 'AuthorizeKey: fast unary path; Health/Check: connect-node handler (not on the fast path)',
    make: (baseUrl, sessionManager, interceptors) => createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true, sessionManager, interceptors }),
  },
  {
    name: 'Connect JSON',
    path: 'both RPCs: connect-node handler',
    make: (baseUrl, sessionManager, interceptors) =>
      createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: false, sessionManager, interceptors }),
  },
];
