import { mkdtemp } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { eventually } from '@switchboard/runtime/testing';
import { expectErrorBody, meshSuiteOfFile, type SignedUp, signUp } from '@switchboard/testkit/mesh';
import { checkDeliveredPayload } from '@switchboard/testkit/webhook-payloads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * SSRF protection of deliveries (docs/webhooks.md#where-deliveries-may-go) with the default policy
 * (WEBHOOKS_ALLOW_PRIVATE_TARGETS unset): receiver URLs on loopback, private, shared and
 * link-local addresses, as IP literals, IPv4-mapped IPv6 and a DNS name resolving to loopback,
 * are accepted at registration (only the syntax and https:// are checked then) but every attempt
 * is refused before a socket is opened: `blocked_address`, no status, no body, and the local
 * HTTPS receivers listening on those addresses never see a connection.
 */

/** An HTTPS server on one loopback address that counts the TCP connections and requests it gets. */
interface CountingServer {
  host: string;
  port: number;
  connections: number;
  requests: string[];
  close(): Promise<void>;
}

async function countingServer(certificate: LocalCertificate, host: string, port = 0): Promise<CountingServer> {
  const server = https.createServer({ key: certificate.key, cert: certificate.cert }, (req, res) => {
    counting.requests.push(`${req.method} ${req.url}`);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      checkDeliveredPayload({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }, `${host} ${req.url}`);
      res.writeHead(204).end();
    });
  });
  const counting: CountingServer = {
    host,
    port: 0,
    connections: 0,
    requests: [],
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', () => {
    counting.connections += 1;
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  counting.port = (server.address() as AddressInfo).port;
  return counting;
}

/** One POST from this process, trusting the local certificate: proves the server answers where the mesh may not go. */
function postDirectly(certificate: LocalCertificate, server: CountingServer, pathname: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: server.host, port: server.port, path: pathname, method: 'POST', ca: certificate.cert, agent: false, timeout: 5000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end('{}');
  });
}

interface Attempt {
  status: string;
  response_status_code: number;
  error_class: string | null;
  response_body: string | null;
  trigger: string;
  url: string;
}

let certificate: LocalCertificate;
let ipv4: CountingServer;
/** Undefined when this machine cannot listen on ::1. */
let ipv6: CountingServer | undefined;
let owner: SignedUp;

// The receivers' hooks come before the mesh's: they start before it boots and close once it has stopped.
beforeAll(async () => {
  certificate = await createLocalCertificate(await mkdtemp(path.join(tmpdir(), 'switchboard-cert-')));
  ipv4 = await countingServer(certificate, '127.0.0.1');
  // The same port on ::1 when free (so localhost reaches a receiver whichever family it resolves to), else any.
  ipv6 = (await countingServer(certificate, '::1', ipv4.port).catch(() => undefined)) ?? (await countingServer(certificate, '::1').catch(() => undefined));
  // The default policy, whatever the shell running the tests has set (components inherit this environment).
  delete process.env.WEBHOOKS_ALLOW_PRIVATE_TARGETS;
});
afterAll(async () => {
  await ipv4?.close();
  await ipv6?.close();
});
const suite = meshSuiteOfFile(() => ({
  // Trusted, so that a delivery the policy let through would reach the receivers and be seen.
  NODE_EXTRA_CA_CERTS: certificate.certFile,
  WEBHOOK_RETRY_SCHEDULE: '20ms',
  WEBHOOK_TIMEOUT: '2s',
  WEBHOOK_LEASE: '5s',
  WEBHOOK_POLL_INTERVAL: '200ms',
}));

beforeAll(async () => {
  owner = await signUp(suite.call);
});

describe('delivery address policy (default: no private targets)', () => {
  it('accepts internal URLs at registration but never connects to them: every attempt is blocked_address', async () => {
    // The receivers answer this process, so nothing below is blocked for lack of a listener or of trust.
    expect(await postDirectly(certificate, ipv4, '/control')).toBe(204);
    if (ipv6) expect(await postDirectly(certificate, ipv6, '/control')).toBe(204);
    const before = { v4: ipv4.connections, v6: ipv6?.connections ?? 0 };
    expect(ipv4.requests).toEqual(['POST /control']);

    const port = ipv4.port;
    const urls = [
      `https://127.0.0.1:${port}/hook`,
      `https://[::ffff:127.0.0.1]:${port}/mapped`,
      `https://localhost:${port}/by-name`,
      // 0.0.0.0 and the decimal form (normalized to 127.0.0.1 by URL) both reach loopback.
      `https://0.0.0.0:${port}/any`,
      `https://2130706433:${port}/decimal`,
      'https://169.254.169.254/latest/meta-data/',
      'https://100.64.0.1/',
      'https://10.0.0.1/',
      ...(ipv6 ? [`https://[::1]:${ipv6.port}/v6`, `https://[::]:${ipv6.port}/v6-any`] : []),
    ];

    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    const sent: Array<{ url: string; webhookId: string; deliveryId: string }> = [];
    for (const url of urls) {
      const created = await suite.call('POST', base, { token: owner.token, body: { url } });
      expect(created.status, `${url}: ${created.text}`).toBe(201);
      const tested = await suite.call('POST', `${base}/${created.json.webhook_id}/test`, { token: owner.token });
      expect(tested.status, `${url}: ${tested.text}`).toBe(202);
      sent.push({ url, webhookId: created.json.webhook_id, deliveryId: tested.json.delivery_id });
    }

    for (const { url, webhookId, deliveryId } of sent) {
      // The test attempt and the one retry of the schedule ('20ms'), both refused.
      const done = await eventually(
        async () => {
          const response = await suite.call('GET', `${base}/${webhookId}/deliveries/${deliveryId}`, { token: owner.token });
          expect(response.status, response.text).toBe(200);
          const delivery = response.json as { status: string; attempt_count: number; attempts: Attempt[] };
          return ['exhausted', 'succeeded'].includes(delivery.status) ? delivery : undefined;
        },
        `delivery to ${url} to end`,
        10_000,
        50,
      );
      expect(done.status, `${url}: ${JSON.stringify(done.attempts)}`).toBe('exhausted');
      expect(done.attempt_count, url).toBe(2);
      expect(done.attempts.map((a) => a.trigger)).toEqual(['test', 'retry']);
      for (const attempt of done.attempts) {
        expect(attempt, url).toMatchObject({ status: 'failed', error_class: 'blocked_address', response_status_code: 0, response_body: null });
      }
    }

    // Not a request, not even a TCP connection, beyond this process's own.
    expect(ipv4.connections - before.v4).toBe(0);
    expect(ipv4.requests).toEqual(['POST /control']);
    if (ipv6) {
      expect(ipv6.connections - before.v6).toBe(0);
      expect(ipv6.requests).toEqual(['POST /control']);
    }
  });

  it('refuses a plain http:// receiver at registration', async () => {
    const base = `/v1/workspaces/${owner.workspaceId}/webhooks`;
    expectErrorBody(await suite.call('POST', base, { token: owner.token, body: { url: `http://127.0.0.1:${ipv4.port}/hook` } }), 400, undefined, 'url');
    expectErrorBody(await suite.call('POST', base, { token: owner.token, body: { url: 'http://example.com/hook' } }), 400, undefined, 'url');
  });
});
