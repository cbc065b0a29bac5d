import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';

/**
 * Mesh callers outside TypeScript load the .proto files themselves, e.g. @grpc/grpc-js with
 * proto-loader (protobufjs), whose parser is stricter than buf's about option values (no lists
 * of messages in text format): every file of the contract must load there as it is.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const files = ['identity', 'keys', 'billing', 'conversations', 'webhooks', 'events'].map((name) => `switchboard/${name}/v1/${name}.proto`);

describe('the contract in a plain gRPC toolchain', () => {
  it.each(files)('%s loads with @grpc/proto-loader', (file) => {
    const definition = protoLoader.loadSync(file, {
      includeDirs: [path.join(root, 'contracts/proto'), path.join(root, 'contracts/vendor'), path.join(root, 'node_modules/google-proto-files')],
    });
    expect(Object.keys(definition).some((name) => name.startsWith('switchboard.'))).toBe(true);
  });
});
