import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A model of a test's catalog, priced per million tokens (cheap unless the test says otherwise). */
export function catalogModel(id: string, region: string, tiers: string[], input = '0.10', output = '0.40') {
  return { id, region, tiers, input_usd_per_1m: input, output_usd_per_1m: output };
}

export interface TestCatalog {
  /** The mesh settings that load it: SWITCHBOARD_MODELS_FILE and the regions' provider keys. */
  env: Record<string, string>;
  remove(): Promise<void>;
}

/**
 * A model catalog file (docs/api/front-door.md) whose regions are a test's upstreams: overseas,
 * and cn when given, each with a provider key of its own the upstream can check.
 */
export async function writeTestCatalog(
  upstreams: { overseas: { baseUrl: string }; cn?: { baseUrl: string } },
  models: Array<ReturnType<typeof catalogModel>>,
): Promise<TestCatalog> {
  const dir = await mkdtemp(path.join(tmpdir(), 'switchboard-catalog-'));
  const file = path.join(dir, 'models.json');
  const regions: Record<string, { base_url: string; api_key_env: string }> = {
    overseas: { base_url: upstreams.overseas.baseUrl, api_key_env: 'TEST_OVERSEAS_KEY' },
  };
  const env: Record<string, string> = { SWITCHBOARD_MODELS_FILE: file, TEST_OVERSEAS_KEY: 'sk-overseas' };
  if (upstreams.cn) {
    regions.cn = { base_url: upstreams.cn.baseUrl, api_key_env: 'TEST_CN_KEY' };
    env.TEST_CN_KEY = 'sk-cn';
  }
  await writeFile(file, JSON.stringify({ regions, models }));
  return { env, remove: () => rm(dir, { recursive: true, force: true }) };
}
