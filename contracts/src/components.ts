/**
 * The components of the mesh, as data: the five services with their default RPC ports
 * (docs/api/internal-calls.md), the data plane and the gateway. What starts or addresses
 * components reads them here (each service's main, the gateway, the data plane, the dev mesh
 * runner of runtime/src/dev); runtime itself names none.
 */

/** The services and the port each serves its RPCs on by default (`PORT`; peers find it at `<NAME>_URL`). */
export const servicePorts = {
  identity: 50051,
  keys: 50052,
  billing: 50053,
  conversations: 50054,
  webhooks: 50055,
} as const;

export type ServiceName = keyof typeof servicePorts;
export const serviceNames = Object.keys(servicePorts) as ServiceName[];

export type ComponentName = ServiceName | 'data-plane' | 'gateway';

export interface MeshComponent {
  name: ComponentName;
  /** Its workspace in the repository; it starts from `<dir>/dist/src/main.js`. */
  dir: string;
  /** Its default port (`PORT`). */
  port: number;
  /** Where `npm start` serves its Prometheus metrics (`METRICS_PORT`). */
  metricsPort: number;
  /** The variable that moves its port under `npm start` (it hands the component `PORT`). */
  portVariable: string;
  /** The variable that moves its metrics port under `npm start` (it hands the component `METRICS_PORT`). */
  metricsPortVariable: string;
  /** An RPC service (runService): migrations, `--rotate-data-key`, peers reach it at `<NAME>_URL`. */
  rpcService: boolean;
  /** The variable through which the others find it, if any. */
  urlVariable?: string;
  /** The public entry: the mesh is ready when its /readyz says so. */
  frontDoor?: boolean;
}

/** Every component, in the order a mesh starts them (the front door last). */
export const meshComponents: readonly MeshComponent[] = [
  ...serviceNames.map((name, index) => ({
    name,
    dir: `services/${name}`,
    port: servicePorts[name],
    metricsPort: 9101 + index,
    portVariable: `${name.toUpperCase()}_PORT`,
    metricsPortVariable: `${name.toUpperCase()}_METRICS_PORT`,
    rpcService: true,
    urlVariable: `${name.toUpperCase()}_URL`,
  })),
  {
    name: 'data-plane',
    dir: 'data-plane',
    port: 8081,
    metricsPort: 9091,
    portVariable: 'DATA_PLANE_PORT',
    metricsPortVariable: 'DATA_PLANE_METRICS_PORT',
    rpcService: false,
    urlVariable: 'DATA_PLANE_URL',
  },
  // The gateway's port keeps the conventional `PORT`: the one port users reach.
  {
    name: 'gateway',
    dir: 'gateway',
    port: 8080,
    metricsPort: 9090,
    portVariable: 'PORT',
    metricsPortVariable: 'GATEWAY_METRICS_PORT',
    rpcService: false,
    frontDoor: true,
  },
];

/** Every component's name, in start order. */
export const componentNames: readonly ComponentName[] = meshComponents.map((component) => component.name);

export const isComponentName = (name: string): name is ComponentName => (componentNames as readonly string[]).includes(name);
