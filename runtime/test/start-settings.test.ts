/** What `npm start` reads and prints without starting anything: its port settings, its rendering of log lines at a terminal. */
import { describe, expect, it } from 'vitest';
import { readMeshPorts } from '../src/dev/mesh.js';
import { prettyLine } from '../src/dev/pretty-log.js';

describe("npm start's rendering of log lines at a terminal", () => {
  it('shows time, level, message and the other fields; leaves other lines alone', () => {
    const line = JSON.stringify({ level: 40, time: '2026-11-26T02:03:34.130Z', svc: 'gateway', err: 'no route', port: 8080, msg: 'could not load' });
    expect(prettyLine(line, false)).toBe('02:03:34.130 WARN  could not load err="no route" port=8080');
    expect(prettyLine(line)).toContain('\x1b[33mWARN \x1b[0m');
    expect(prettyLine('> npm run build', false)).toBe('> npm run build');
    expect(prettyLine('[1,2]', false)).toBe('[1,2]');
  });
});

describe('the ports of npm start', () => {
  it('takes each component variable, else the default shifted by SWITCHBOARD_PORT_OFFSET', () => {
    expect(readMeshPorts({})).toMatchObject({
      ports: { gateway: 8080, 'data-plane': 8081, identity: 50051, webhooks: 50055 },
      metricsPorts: { gateway: 9090, keys: 9102 },
    });
    const moved = readMeshPorts({ SWITCHBOARD_PORT_OFFSET: '1000', KEYS_PORT: '7000', GATEWAY_METRICS_PORT: '7001' });
    expect(moved.ports).toEqual({ identity: 51051, keys: 7000, billing: 51053, conversations: 51054, webhooks: 51055, 'data-plane': 9081, gateway: 9080 });
    expect(moved.metricsPorts).toMatchObject({ gateway: 7001, 'data-plane': 10091, identity: 10101, webhooks: 10105 });
  });

  it('stops at a bad value, naming the variable', () => {
    expect(() => readMeshPorts({ KEYS_PORT: 'x' })).toThrow(/KEYS_PORT/);
    expect(() => readMeshPorts({ DATA_PLANE_PORT: '0' })).toThrow(/DATA_PLANE_PORT must be at least 1/);
    expect(() => readMeshPorts({ PORT: '70000' })).toThrow(/PORT must be a port/);
    expect(() => readMeshPorts({ SWITCHBOARD_PORT_OFFSET: '20000' })).toThrow(/SWITCHBOARD_PORT_OFFSET=20000 moves IDENTITY_PORT past 65535/);
    expect(() => readMeshPorts({ SWITCHBOARD_PORT_OFFSET: '-1' })).toThrow(/SWITCHBOARD_PORT_OFFSET/);
  });
});
