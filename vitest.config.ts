import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'contracts/test/**/*.test.ts',
      'runtime/test/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'data-plane/test/**/*.test.ts',
      'gateway/test/**/*.test.ts',
      'sdk/test/**/*.test.ts',
      'dashboard/test/**/*.test.ts',
      'dashboard/e2e/**/*.test.ts',
      'e2e/**/*.test.ts',
    ],
    globalSetup: ['runtime/test/global-setup.ts'],
    pool: 'forks',
    // Suites boot real processes against one Postgres and one NATS: run files one at a time
    // (2 cores) so timings stay sane and nothing competes for ports.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 120_000,
  },
});
