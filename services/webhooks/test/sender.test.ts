import dgram from 'node:dgram';
import { mkdtemp, rm } from 'node:fs/promises';
import type http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLocalCertificate, type LocalCertificate } from '@switchboard/runtime/dev/local-certificate';
import { freePort } from '@switchboard/runtime/infra';
import { isBlockedAddress } from '@switchboard/webhooks/address-policy';
import { WebhookSender } from '@switchboard/webhooks/sender';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

/**
 * The outgoing delivery layer: which addresses a delivery may reach, and one attempt against real
 * HTTPS receivers on this machine (a throwaway certificate, trusted through the sender's `ca`).
 */

describe('the address policy', () => {
  it('refuses private, loopback, link-local, metadata and reserved addresses in every spelling', () => {
    const blocked = [
      '127.0.0.1',
      '127.255.255.254',
      '0.0.0.0',
      '10.1.2.3',
      '100.64.0.1',
      '169.254.169.254',
      '172.16.0.1',
      '172.31.255.255',
      '192.0.0.9',
      '192.0.2.1',
      '192.88.99.1',
      '192.168.0.1',
      '198.18.0.1',
      '198.19.255.255',
      '198.51.100.1',
      '203.0.113.1',
      '224.0.0.1',
      '240.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      '0:0:0:0:0:0:0:1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::FFFF:7F00:1',
      '0:0:0:0:0:ffff:7f00:0001',
      '::ffff:169.254.169.254',
      '::ffff:10.0.0.1',
      '::127.0.0.1',
      '::8.8.8.8',
      '64:ff9b::7f00:1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::10.0.0.1',
      '64:ff9b:1::1',
      '100::1',
      '2001::1',
      '2001:1ff::1',
      '2001:db8::1',
      '2002:7f00:1::1',
      '2002:a9fe:a9fe::',
      'fc00::1',
      'fd00:ec2::254',
      'fe80::1',
      'fe80::1%eth0',
      'febf::1',
      'fec0::1',
      'ff02::1',
      '3fff::1',
    ];
    for (const address of blocked) expect(isBlockedAddress(address), address).toBe(true);
  });

  it('allows public unicast addresses, also carried in mapped, NAT64 and 6to4 forms', () => {
    const allowed = [
      '8.8.8.8',
      '1.1.1.1',
      '9.255.255.255',
      '11.0.0.1',
      '100.63.255.255',
      '100.128.0.1',
      '172.15.255.255',
      '172.32.0.1',
      '192.0.1.1',
      '198.20.0.1',
      '223.255.255.255',
      '2606:4700:4700::1111',
      '2a00:1450:4001:82b::200e',
      '2001:200::1',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
      '64:ff9b::8.8.8.8',
      '2002:808:808::1',
    ];
    for (const address of allowed) expect(isBlockedAddress(address), address).toBe(false);
  });

  it('refuses anything that is not a bare IP address', () => {
    for (const text of [
      '',
      'localhost',
      '[::1]',
      '127.1',
      '2130706433',
      '0x7f.0.0.1',
      '127.000.000.001',
      ' 8.8.8.8',
      '8.8.8.8/32',
      '1::2::3',
      ':::',
      'gggg::1',
    ]) {
      expect(isBlockedAddress(text), text).toBe(true);
    }
  });
});

interface Hit {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

type Answer = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** An HTTPS receiver on [::] (so localhost, 127.0.0.1 and [::1] all reach it) that records what it is sent. */
class Receiver {
  readonly hits: Hit[] = [];
  connections = 0;
  answer: Answer = (_req, res) => res.end('ok');
  private readonly server: https.Server;

  constructor(certificate: LocalCertificate) {
    this.server = https.createServer({ key: certificate.key, cert: certificate.cert }, (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        this.hits.push({ path: req.url ?? '', headers: req.headers, body });
        this.answer(req, res);
      });
    });
    this.server.on('secureConnection', () => this.connections++);
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '::', resolve));
  }

  url(host: string, path = '/hook'): string {
    return `https://${host}:${(this.server.address() as AddressInfo).port}${path}`;
  }

  reset(): void {
    this.hits.length = 0;
    this.connections = 0;
    this.answer = (_req, res) => res.end('ok');
    this.server.closeAllConnections();
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * A DNS server on 127.0.0.1 (UDP) with fixed answers: A and AAAA records of the names it knows,
 * NXDOMAIN for the others, and nothing at all, ever, for the names it is told to ignore. It
 * records the names it was asked.
 */
class LocalDnsServer {
  readonly asked: string[] = [];
  private readonly socket = dgram.createSocket('udp4');

  constructor(
    private readonly records: Record<string, string[]>,
    private readonly silent: Set<string>,
  ) {
    this.socket.on('message', (query, peer) => {
      const answer = this.answer(query);
      if (answer) this.socket.send(answer, peer.port, peer.address);
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.socket.bind(0, '127.0.0.1', resolve));
    return `127.0.0.1:${this.socket.address().port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  /** The response to a query of one question (RFC 1035 §4.1), or undefined to stay silent. */
  private answer(query: Buffer): Buffer | undefined {
    const labels: string[] = [];
    let offset = 12;
    while (query[offset] !== 0) {
      labels.push(query.subarray(offset + 1, offset + 1 + query[offset]).toString('ascii'));
      offset += 1 + query[offset];
    }
    const type = query.readUInt16BE(offset + 1);
    const questionEnd = offset + 5;
    const name = labels.join('.').toLowerCase();
    this.asked.push(name);
    if (this.silent.has(name)) return undefined;
    const addresses = this.records[name];
    const wanted = (addresses ?? []).filter((address) => net.isIP(address) === (type === 28 ? 6 : type === 1 ? 4 : 0));
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    // A response, authoritative, recursion desired as asked and available; NXDOMAIN for an unknown name.
    header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | 0x0080 | (addresses ? 0 : 3), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(wanted.length, 6);
    const records = wanted.map((address) => {
      const data = net.isIPv4(address) ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
      const record = Buffer.alloc(12);
      record.writeUInt16BE(0xc00c, 0); // the question's name
      record.writeUInt16BE(type, 2);
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6);
      record.writeUInt16BE(data.length, 10);
      return Buffer.concat([record, data]);
    });
    return Buffer.concat([header, query.subarray(12, questionEnd), ...records]);
  }
}

/** The 16 bytes of an IPv6 address written with `::`. */
function ipv6Bytes(address: string): Buffer {
  const [head, tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = Buffer.alloc(16);
  groups.forEach((group, index) => {
    bytes.writeUInt16BE(Number.parseInt(group, 16), index * 2);
  });
  return bytes;
}

describe('WebhookSender', () => {
  let dir: string;
  let certificate: LocalCertificate;
  let receiver: Receiver;
  let sender: WebhookSender;
  const post = (url: string, poolKey = 'whk_1') => sender.send({ url, headers: { 'webhook-id': 'msg_1' }, body: '{"type":"test"}', poolKey });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'webhooks-sender-'));
    certificate = await createLocalCertificate(dir, ['receiver.sb.test']);
    receiver = new Receiver(certificate);
    await receiver.listen();
  });

  afterAll(async () => {
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    sender = new WebhookSender({ allowPrivateTargets: true, ca: certificate.cert });
  });

  afterEach(() => {
    sender.close();
    receiver.reset();
  });

  it('POSTs JSON with the given headers and succeeds on a 2xx, keeping the first 4 KiB of the body', async () => {
    receiver.answer = (_req, res) => res.writeHead(200).end('x'.repeat(10_000));
    const result = await post(receiver.url('127.0.0.1', '/hook?a=1'));
    expect(result).toMatchObject({ ok: true, statusCode: 200, errorClass: null });
    expect(result.responseBody).toBe('x'.repeat(4096));
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(result.retryAfterMs).toBeUndefined();
    expect(receiver.hits).toEqual([
      {
        path: '/hook?a=1',
        body: '{"type":"test"}',
        headers: expect.objectContaining({ 'content-type': 'application/json', 'content-length': '15', 'webhook-id': 'msg_1' }),
      },
    ]);
  });

  it('decodes the body as UTF-8, replacing invalid bytes', async () => {
    receiver.answer = (_req, res) => res.writeHead(204).end();
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: true, statusCode: 204, responseBody: '' });
    receiver.answer = (_req, res) => res.writeHead(201).end(Buffer.from([0x68, 0xc3, 0xa9, 0xff, 0x21]));
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: true, statusCode: 201, responseBody: 'hé\uFFFD!' });
  });

  it('reaches a receiver by name (the certificate checked against the name) or by IPv6 literal', async () => {
    expect(await post(receiver.url('localhost'))).toMatchObject({ ok: true, statusCode: 200, responseBody: 'ok' });
    expect(await post(receiver.url('[::1]'))).toMatchObject({ ok: true, statusCode: 200, responseBody: 'ok' });
  });

  it('keeps one connection per pool alive between attempts; close() ends it', async () => {
    for (let i = 0; i < 3; i++) expect((await post(receiver.url('127.0.0.1'))).ok).toBe(true);
    expect(receiver.connections).toBe(1);
    expect((await post(receiver.url('127.0.0.1'), 'whk_2')).ok).toBe(true);
    expect(receiver.connections).toBe(2);
    sender.close();
    expect((await post(receiver.url('127.0.0.1'))).ok).toBe(true);
    expect(receiver.connections).toBe(3);
  });

  it('fails with http on any other status, the body kept', async () => {
    receiver.answer = (_req, res) => res.writeHead(500).end('{"error":"boom"}');
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: false, statusCode: 500, errorClass: 'http', responseBody: '{"error":"boom"}' });
    receiver.answer = (_req, res) => res.writeHead(404).end();
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: false, statusCode: 404, errorClass: 'http', responseBody: '' });
  });

  it('never follows a redirect', async () => {
    receiver.answer = (_req, res) => res.writeHead(302, { location: receiver.url('127.0.0.1', '/elsewhere') }).end('moved');
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: false, statusCode: 302, errorClass: 'http', responseBody: 'moved' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.hits.map((hit) => hit.path)).toEqual(['/hook']);
  });

  it('reads Retry-After of a 429 or 503 as delta seconds or an HTTP date', async () => {
    receiver.answer = (_req, res) => res.writeHead(429, { 'retry-after': '3' }).end();
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: false, statusCode: 429, errorClass: 'http', retryAfterMs: 3000 });

    receiver.answer = (_req, res) => res.writeHead(503, { 'retry-after': new Date(Date.now() + 10_000).toUTCString() }).end();
    const dated = await post(receiver.url('127.0.0.1'));
    expect(dated).toMatchObject({ statusCode: 503, errorClass: 'http' });
    expect(dated.retryAfterMs).toBeGreaterThan(8000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(10_000);

    for (const [status, value] of [
      [429, 'soon'],
      [429, '1.5'],
      [429, '-1'],
      [500, '3'],
    ] as const) {
      receiver.answer = (_req, res) => res.writeHead(status, { 'retry-after': value }).end();
      const result = await post(receiver.url('127.0.0.1'));
      expect(result.statusCode).toBe(status);
      expect(result.retryAfterMs, `${status} ${value}`).toBeUndefined();
    }
  });

  it('times out at the deadline, waiting for headers or for the body', async () => {
    sender = new WebhookSender({ allowPrivateTargets: true, ca: certificate.cert, timeoutMs: 300 });
    receiver.answer = () => {};
    const silent = await post(receiver.url('127.0.0.1'));
    expect(silent).toMatchObject({ ok: false, statusCode: 0, errorClass: 'timeout', responseBody: null });
    expect(silent.durationMs).toBeGreaterThanOrEqual(290);
    expect(silent.durationMs).toBeLessThan(2000);

    receiver.answer = (_req, res) => res.writeHead(200).write('partial');
    expect(await post(receiver.url('127.0.0.1'))).toMatchObject({ ok: false, statusCode: 200, errorClass: 'timeout', responseBody: 'partial' });
  });

  it('classifies a refused connection as connect, an untrusted certificate as tls, an unknown name as dns', async () => {
    expect(await post(`https://127.0.0.1:${await freePort()}/`)).toMatchObject({ ok: false, statusCode: 0, errorClass: 'connect', responseBody: null });
    expect(await post('http://127.0.0.1/')).toMatchObject({ ok: false, statusCode: 0, errorClass: 'connect' });

    const untrusting = new WebhookSender({ allowPrivateTargets: true });
    try {
      expect(await untrusting.send({ url: receiver.url('localhost'), headers: {}, body: '{}', poolKey: 'whk_1' })).toMatchObject({
        ok: false,
        statusCode: 0,
        errorClass: 'tls',
      });
    } finally {
      untrusting.close();
    }
    expect(receiver.hits).toEqual([]);

    expect(await post('https://does-not-exist.invalid/')).toMatchObject({ ok: false, statusCode: 0, errorClass: 'dns', responseBody: null });
  });

  it('refuses private targets, by name (a name under localhost without asking a resolver) or IP literal, without ever connecting', async () => {
    sender = new WebhookSender({ allowPrivateTargets: false, ca: certificate.cert });
    for (const host of ['localhost', 'hooks.localhost', 'HOOKS.LOCALHOST.', '127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', '[64:ff9b::7f00:1]', '2130706433']) {
      expect(await post(receiver.url(host)), host).toMatchObject({ ok: false, statusCode: 0, errorClass: 'blocked_address', responseBody: null });
    }
    expect(receiver.connections).toBe(0);
    expect(receiver.hits).toEqual([]);
  });
  describe('names, through an asynchronous resolver with a timeout', () => {
    const dns = new LocalDnsServer(
      {
        'receiver.sb.test': ['127.0.0.1'],
        'private.sb.test': ['10.0.0.1'],
        'mixed.sb.test': ['8.8.8.8', '::1'],
      },
      new Set(['hang.sb.test']),
    );
    let servers: string;
    const timeoutMs = 3000;

    beforeAll(async () => {
      servers = await dns.listen();
    });

    afterAll(() => dns.close());

    const senderOf = (allowPrivateTargets: boolean) =>
      new WebhookSender({ allowPrivateTargets, ca: certificate.cert, dnsServers: [servers], dnsTimeoutMs: timeoutMs });

    it('asks the given server for A and AAAA; a name it never answers fails as dns after the timeout, and delays no other name', async () => {
      sender = senderOf(true);
      // More hung names than libuv has threads (4): getaddrinfo would make every other resolution wait behind them.
      const hung = Array.from({ length: 8 }, (_, i) => {
        const attempt = { settled: false, result: post(`https://hang.sb.test:443/${i}`, `hung_${i}`) };
        void attempt.result.then(() => (attempt.settled = true));
        return attempt;
      });
      for (let i = 0; i < 10; i++) {
        expect(await post(receiver.url('receiver.sb.test'), `fast_${i}`)).toMatchObject({ ok: true, statusCode: 200 });
      }
      expect(hung.filter((attempt) => attempt.settled)).toEqual([]);
      for (const attempt of hung) {
        const result = await attempt.result;
        expect(result).toMatchObject({ ok: false, statusCode: 0, errorClass: 'dns', responseBody: null });
        expect(result.durationMs).toBeGreaterThanOrEqual(timeoutMs - 50);
      }
      expect(dns.asked).toContain('hang.sb.test');
      expect(dns.asked).toContain('receiver.sb.test');
      expect(receiver.hits).toHaveLength(10);
    });

    it('fails an unknown name as dns at once, and refuses a name with any blocked address, of either family', async () => {
      sender = senderOf(false);
      expect(await post('https://unknown.sb.test/')).toMatchObject({ ok: false, statusCode: 0, errorClass: 'dns', responseBody: null });
      expect(await post(receiver.url('private.sb.test'))).toMatchObject({ ok: false, errorClass: 'blocked_address' });
      expect(await post(receiver.url('mixed.sb.test'))).toMatchObject({ ok: false, errorClass: 'blocked_address' });
      // A name under localhost is never asked of a server, nor one under invalid (RFC 6761).
      const asked = dns.asked.length;
      expect(await post(receiver.url('hooks.localhost'))).toMatchObject({ errorClass: 'blocked_address' });
      expect(await post('https://hooks.invalid/')).toMatchObject({ errorClass: 'dns' });
      expect(dns.asked).toHaveLength(asked);
      expect(receiver.connections).toBe(0);
    });
  });
});
