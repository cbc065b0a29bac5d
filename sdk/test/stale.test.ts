import { readFile } from 'node:fs/promises';
import { openApiDocumentText } from '@switchboard/gateway/openapi-export';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';

/**
 * The SDK's generated files are checked in (users of the SDK get them without running the
 * generator); they must be what `npm run gen` would write now: the gateway's document, and the
 * types openapi-typescript makes of it (the same as its CLI with no options).
 */
const sdkFile = (name: string) => new URL(`../${name}`, import.meta.url);
const hint = 'the SDK is stale: run npm run gen (and commit sdk/openapi.json and sdk/src/schema.ts)';

describe('generated SDK files', () => {
  const document = openApiDocumentText();

  it('sdk/openapi.json is the document the gateway serves', async () => {
    const checkedIn = await readFile(sdkFile('openapi.json'), 'utf8');
    // Compared as text first so the failure says what to do; the diff follows from toEqual.
    if (checkedIn !== document) expect(JSON.parse(checkedIn), hint).toEqual(JSON.parse(document));
    expect(checkedIn === document, hint).toBe(true);
  });

  it('sdk/src/schema.ts is what openapi-typescript generates from it', async () => {
    const generated = `${COMMENT_HEADER}${astToString(await openapiTS(JSON.parse(document), { silent: true }))}`;
    const checkedIn = await readFile(sdkFile('src/schema.ts'), 'utf8');
    expect(checkedIn === generated, hint).toBe(true);
  });
});
