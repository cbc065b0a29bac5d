import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface LocalCertificate {
  /** PEM private key. */
  key: string;
  /** PEM certificate; being self-signed and a CA, it is also what clients trust. */
  cert: string;
  /** The certificate's path, e.g. for NODE_EXTRA_CA_CERTS of a child process. */
  certFile: string;
}

/**
 * A throwaway certificate for HTTPS receivers in tests and benchmarks: self-signed for localhost,
 * 127.0.0.1, ::1 and `names` (e.g. names a test's own DNS server answers), valid for 2 days, written to `dir` as key.pem and cert.pem. Made by the
 * openssl CLI (Node cannot issue certificates); `-config /dev/null` keeps the machine's
 * openssl.cnf from adding or changing extensions.
 */
export async function createLocalCertificate(dir: string, names: string[] = []): Promise<LocalCertificate> {
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  await run('openssl', [
    'req',
    '-x509',
    '-config',
    '/dev/null',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    `subjectAltName=${['DNS:localhost', 'IP:127.0.0.1', 'IP:::1', ...names.map((name) => `DNS:${name}`)].join(',')}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,digitalSignature,keyCertSign',
  ]);
  const [key, cert] = await Promise.all([readFile(keyFile, 'utf8'), readFile(certFile, 'utf8')]);
  return { key, cert, certFile };
}
