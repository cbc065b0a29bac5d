import { type Client, Code, ConnectError } from '@connectrpc/connect';
import type { KeyService } from '@switchboard/contracts/switchboard/keys/v1/keys_pb';

/**
 * Which workspace a key belongs to, asked of the keys service once per key (a key never changes
 * workspace, so the answer is kept; bounded). Undefined for a key that never existed.
 */
export class KeyDirectory {
  private readonly workspaces = new Map<string, string>();

  constructor(private readonly keys: Client<typeof KeyService>) {}

  async workspaceOf(keyId: string): Promise<string | undefined> {
    const known = this.workspaces.get(keyId);
    if (known) return known;
    try {
      const key = await this.keys.describeKey({ keyId }, { timeoutMs: 5000 });
      if (this.workspaces.size >= 100_000) this.workspaces.clear();
      this.workspaces.set(keyId, key.workspaceId);
      return key.workspaceId;
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) return undefined;
      throw err;
    }
  }
}
