import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildOpenApiDocument } from './openapi.js';
import { buildRoutes } from './routes.js';

/**
 * The OpenAPI document the gateway serves at /v1/openapi.json, as the text `npm run gen` writes
 * to sdk/openapi.json (pretty JSON, trailing newline); the SDK's staleness test compares with it.
 */
export function openApiDocumentText(): string {
  return `${JSON.stringify(buildOpenApiDocument(buildRoutes()), null, 2)}\n`;
}

// `node gateway/dist/src/openapi-export.js <file>` writes the document to <file>.
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const target = process.argv[2];
  if (!target) {
    process.stderr.write('usage: node gateway/dist/src/openapi-export.js <output file>\n');
    process.exit(2);
  }
  writeFileSync(target, openApiDocumentText());
}
