import { createCipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, readDataKeys, readPreviousMeshSecret } from '../src/config.js';
import { constantTimeEqual, DataKeyRing, decryptLegacySecret, SecretError, sha256Hex } from '../src/secrets.js';

const entry = (id: string) => DataKeyRing.generateEntry(id);

describe('the data-key ring', () => {
  it('encrypts with the first key, names it in the ciphertext, and never repeats a ciphertext', () => {
    const ring = DataKeyRing.parse(`${entry('k2')},${entry('k1')}`);
    expect(ring.currentKeyId).toBe('k2');
    expect(ring.keyIds).toEqual(['k2', 'k1']);
    const first = ring.encrypt('{"d":"private"}', 'test.purpose');
    const second = ring.encrypt('{"d":"private"}', 'test.purpose');
    expect(first).toMatch(/^v2\.k2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(first).not.toBe(second);
    expect(first).not.toContain('private');
    expect(ring.decrypt(first, 'test.purpose')).toBe('{"d":"private"}');
    expect(ring.isCurrent(first)).toBe(true);
  });

  it('decrypts with any key of the ring, so a new key can go in front', () => {
    const old = entry('k1');
    const sealed = DataKeyRing.parse(old).encrypt('totp seed', 'test.purpose');
    const rotated = DataKeyRing.parse(`${entry('k2')},${old}`);
    expect(rotated.decrypt(sealed, 'test.purpose')).toBe('totp seed');
    expect(rotated.isCurrent(sealed)).toBe(false);
    // Without the old key, the ciphertext is unreadable and the error names the missing key.
    expect(() => DataKeyRing.parse(entry('k2')).decrypt(sealed, 'test.purpose')).toThrow(/data key k1 is not in the ring/);
  });

  it('refuses another purpose, a key with the same id but other bytes, tampered data and unknown formats', () => {
    const ring = DataKeyRing.parse(entry('k1'));
    const sealed = ring.encrypt('secret', 'test.purpose');
    expect(() => ring.decrypt(sealed, 'test.other')).toThrow(/cannot decrypt/);
    expect(() => DataKeyRing.parse(entry('k1')).decrypt(sealed, 'test.purpose')).toThrow(/cannot decrypt/);
    const parts = sealed.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    expect(() => ring.decrypt(parts.join('.'), 'test.purpose')).toThrow(/cannot decrypt/);
    expect(() => ring.decrypt(`v3.${sealed.slice(3)}`, 'test.purpose')).toThrow(/unknown format/);
    expect(() => ring.decrypt('plain text', 'test.purpose')).toThrow(/unknown format/);
    expect(() => ring.decrypt('v1.aaaa.bbbb.cccc', 'test.purpose')).toThrow(/--rotate-data-key/);
  });

  it('parses strictly, naming the variable and the entry but never the key', () => {
    const key = randomBytes(32).toString('base64');
    const cases: Array<[string, RegExp]> = [
      ['', /empty/],
      [key, /entry 1: expected id:base64/],
      [`k1:${randomBytes(16).toString('base64')}`, /entry 1 \(k1\): the key must be 32 bytes, got 16/],
      [`k1:${key},k1:${key}`, /entry 2: the key id k1 appears twice/],
      [`bad.id:${key}`, /entry 1: the key id must be/],
      [`k1:not base64!`, /entry 1 \(k1\): the key is not base64/],
    ];
    for (const [raw, message] of cases) {
      let error: unknown;
      try {
        DataKeyRing.parse(raw, 'SWITCHBOARD_DATA_KEYS');
      } catch (err) {
        error = err;
      }
      expect(error, raw).toBeInstanceOf(SecretError);
      expect((error as Error).message).toMatch(/^SWITCHBOARD_DATA_KEYS/);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain(key);
    }
    // base64url keys are accepted too.
    expect(DataKeyRing.parse(`k1:${randomBytes(32).toString('base64url')}`).currentKeyId).toBe('k1');
  });

  it('derives the same value from the same input and key id, whichever key is current', () => {
    const k1 = entry('k1');
    const before = DataKeyRing.parse(k1).derive('token.nonce', 'test.derive');
    const after = DataKeyRing.parse(`${entry('k2')},${k1}`);
    expect(after.derive('token.nonce', 'test.derive', 'k1')).toBe(before);
    expect(after.derive('token.nonce', 'test.derive')).not.toBe(before);
  });

  it('reads the ring and the previous mesh secret from the environment with errors naming the variable', () => {
    expect(() => readDataKeys({})).toThrow(ConfigError);
    expect(() => readDataKeys({})).toThrow(/SWITCHBOARD_DATA_KEYS is required/);
    expect(() => readDataKeys({ SWITCHBOARD_DATA_KEYS: 'k1:short' })).toThrow(/SWITCHBOARD_DATA_KEYS, entry 1/);
    expect(readDataKeys({ SWITCHBOARD_DATA_KEYS: entry('k9') }).currentKeyId).toBe('k9');
    expect(readPreviousMeshSecret({})).toBeUndefined();
    expect(() => readPreviousMeshSecret({ SWITCHBOARD_MESH_SECRET_PREVIOUS: 'short' })).toThrow(/SWITCHBOARD_MESH_SECRET_PREVIOUS must be at least 32 bytes/);
  });
});

describe('secrets of the format before data keys (v1)', () => {
  it('are read with the mesh secret they were written under, for the rotation only', () => {
    const meshSecret = 'm'.repeat(40);
    // The v1 format exactly as it was written: HKDF of the mesh secret, purpose as AAD.
    const aesKey = Buffer.from(hkdfSync('sha256', Buffer.from(meshSecret), 'switchboard/secrets/v1', 'switchboard:test.purpose', 32));
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', aesKey, iv, { authTagLength: 16 });
    cipher.setAAD(Buffer.from('test.purpose'));
    const ciphertext = Buffer.concat([cipher.update('legacy'), cipher.final()]);
    const sealed = ['v1', iv.toString('base64url'), ciphertext.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
    expect(decryptLegacySecret(sealed, 'test.purpose', meshSecret).toString()).toBe('legacy');
    expect(() => decryptLegacySecret(sealed, 'test.purpose', 'x'.repeat(40))).toThrow(/cannot decrypt/);
  });
});

describe('hashes and comparisons', () => {
  it('hashes and compares', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(constantTimeEqual('same', 'same')).toBe(true);
    expect(constantTimeEqual('same', 'other')).toBe(false);
    expect(constantTimeEqual('same', 'sam')).toBe(false);
  });
});
