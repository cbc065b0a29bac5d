import { fileURLToPath } from 'node:url';
import { runService } from '@switchboard/runtime/service';
import { routes } from './server.js';

await runService({
  name: 'billing',
  migrationsDir: fileURLToPath(new URL('../migrations', import.meta.url)),
  routes,
});
