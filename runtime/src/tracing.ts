import path from 'node:path';
import { tracingEnabled } from './tracing-enabled.js';

/**
 * Loaded before a component's own code (`node --import @switchboard/runtime/tracing <main.js>`,
 * as the dev mesh and the images start them), because the instrumentations must be in place before
 * node:http and pg are loaded. When tracing is off this module is all that is loaded.
 */
if (tracingEnabled(process.env)) {
  const { startTracing } = await import('./tracing-sdk.js');
  // The component is the package of its entry point: services/keys/dist/src/main.js is "keys".
  const entry = process.argv[1];
  await startTracing(entry ? path.basename(path.resolve(entry, '../../..')) : 'switchboard');
}
