import { execFileSync } from 'node:child_process';
import { repoRoot } from '@switchboard/runtime/dev/mesh';
import { tracingEnabled } from '@switchboard/runtime/tracing-enabled';
import { describe, expect, it } from 'vitest';

/**
 * When tracing is on (docs/operations.md, "Traces"), and that with it off the entry point every
 * component is started with loads nothing of OpenTelemetry and instruments nothing.
 */

describe('tracingEnabled', () => {
  it('is off with no OTEL_* exporter variable', () => {
    expect(tracingEnabled({})).toBe(false);
    expect(tracingEnabled({ OTEL_SERVICE_NAME: 'keys', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_ENDPOINT: ' ' })).toBe(false);
  });

  it('is on with an OTLP endpoint or a named exporter', () => {
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracingEnabled({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(tracingEnabled({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'false' })).toBe(true);
  });

  it('is off when disabled, whatever else is set', () => {
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBe(false);
    expect(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(tracingEnabled({ OTEL_TRACES_EXPORTER: 'console, none' })).toBe(false);
  });
});

describe('the tracing entry point (node --import)', () => {
  const entry = new URL('runtime/dist/src/tracing.js', `file://${repoRoot}`).href;
  // What a component would see once its own imports ran: is node:http's server instrumented, and
  // is any OpenTelemetry module loaded?
  const probe = `
    import http from 'node:http';
    import { createRequire } from 'node:module';
    const cache = createRequire(process.cwd() + '/').cache;
    console.log(JSON.stringify({
      instrumented: '__wrapped' in http.Server.prototype.emit,
      loaded: Object.keys(cache).filter((file) => file.includes('@opentelemetry')).length,
    }));`;
  const run = (env: Record<string, string>) => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')));
    const output = execFileSync(process.execPath, ['--import', entry, '--input-type=module', '-e', probe], {
      cwd: repoRoot,
      env: { ...base, ...env },
      encoding: 'utf8',
    });
    return JSON.parse(output) as { instrumented: boolean; loaded: number };
  };

  it('loads and instruments nothing without OTEL_* variables', () => {
    expect(run({})).toEqual({ instrumented: false, loaded: 0 });
  });

  it('instruments the ESM import of node:http when an endpoint is set', () => {
    // Nothing is exported: the probe makes no span.
    const traced = run({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    expect(traced.instrumented).toBe(true);
    expect(traced.loaded).toBeGreaterThan(0);
  });
});
