import http from 'node:http';
import type net from 'node:net';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from './log.js';

/**
 * Prometheus metrics of one component. They are served on a port of their own (`METRICS_PORT`),
 * never on a public one: a scraper reaches it inside the cluster, a client of the API never does.
 * Unset, a component serves no metrics (the registry still counts, for tests and for later).
 */
export class Metrics {
  private readonly counters = new Map<string, Counter<string>>();
  readonly registry = new Registry();

  /** Gauges whose read failed at a scrape (their values are the last ones read). */
  private readonly collectFailures: Counter<'metric'>;

  constructor(readonly component: string) {
    this.registry.setDefaultLabels({ component });
    collectDefaultMetrics({ register: this.registry });
    this.collectFailures = new Counter({
      name: 'metrics_collect_failures_total',
      help: 'Scrapes at which a gauge could not be read (it kept its last values).',
      labelNames: ['metric'],
      registers: [this.registry],
    });
  }

  /** A counter, registered once per name: a second call with the same name returns the first. */
  counter<L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> {
    const known = this.counters.get(name);
    if (known) return known as Counter<L>;
    const counter = new Counter({ name, help, labelNames, registers: [this.registry] });
    this.counters.set(name, counter);
    return counter;
  }

  /** A latency histogram in seconds, with buckets from 1 ms to 30 s. */
  histogram<L extends string>(name: string, help: string, labelNames: readonly L[]): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets: latencyBuckets, registers: [this.registry] });
  }

  /**
   * A gauge read when scraped: `collect` sets its values. A failing read (the database down)
   * leaves the last values and the rest of the scrape intact: the process metrics matter most
   * exactly then.
   */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], collect: (gauge: Gauge<L>) => Promise<void> | void): Gauge<L> {
    const failures = this.collectFailures;
    return new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        try {
          await collect(this);
        } catch {
          failures.inc({ metric: name });
        }
      },
    });
  }
}

const latencyBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` (the text format) and nothing else. */
export async function startMetricsServer(options: { metrics: Metrics; port: number; host?: string; log: Logger }): Promise<MetricsServer> {
  const { metrics, log } = options;
  const server = http.createServer((req, res) => {
    const { pathname } = new URL(req.url ?? '/', 'http://metrics');
    if (pathname !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      // docs/conventions.md#errors: no error is cached, here either.
      res.writeHead(404, { 'content-type': 'text/plain', 'cache-control': 'no-store' }).end('not found\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => {
        log.warn({ err }, 'metrics collection failed');
        res.writeHead(500, { 'content-type': 'text/plain', 'cache-control': 'no-store' }).end('metrics collection failed\n');
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  log.info({ port }, 'metrics on /metrics');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
