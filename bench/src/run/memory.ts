import { components, type Mesh } from '@switchboard/runtime/dev/mesh';
import { round } from '../measure/latency.js';
import { readMemory } from '../measure/proc.js';
import { type BenchReport, check, type MemoryRow } from '../report.js';

/** The idle mesh's RSS that fails the target. */
const idleMeshLimitMb = 600;

function memoryRow(report: BenchReport, name: string, pid: number | undefined, counted: boolean): MemoryRow {
  let row = report.memory.find((m) => m.name === name);
  if (!row) {
    row = { name, pid, counted };
    report.memory.push(row);
  }
  return row;
}

/** The RSS of every component (counted in the total, which has a target) and of the nats-server, the mesh idle. */
export function measureIdle(report: BenchReport, mesh: Mesh, natsPid: number | undefined): void {
  let total = 0;
  for (const component of components) {
    const memory = readMemory(mesh.pid(component));
    if (!memory) throw new Error(`${component} is not running: ${mesh.output(component).split('\n').slice(-10).join('\n')}`);
    memoryRow(report, component, memory.pid, true).idleRssMb = memory.rssMb;
    total += memory.rssMb;
  }
  const nats = readMemory(natsPid);
  if (nats) memoryRow(report, 'nats-server', nats.pid, false).idleRssMb = nats.rssMb;
  report.idleMeshTotalMb = round(total, 1);
  report.targets.push(check('idle mesh RSS total', report.idleMeshTotalMb, '<', idleMeshLimitMb, 'MB'));
}

/** The peak RSS (VmHWM) of every component, of the baseline server and of the nats-server, after the load. */
export function measurePeak(report: BenchReport, mesh: Mesh, pids: { baseline?: number; nats?: number }): void {
  let total = 0;
  for (const component of components) {
    const memory = readMemory(mesh.pid(component));
    if (!memory) continue; // deadProcess reports it
    memoryRow(report, component, memory.pid, true).peakRssMb = memory.hwmMb;
    total += memory.hwmMb;
  }
  report.peakMeshTotalMb = round(total, 1);
  const baseline = readMemory(pids.baseline);
  if (baseline) memoryRow(report, 'baseline (fastify+pg)', baseline.pid, false).peakRssMb = baseline.hwmMb;
  const nats = readMemory(pids.nats);
  if (nats) memoryRow(report, 'nats-server', nats.pid, false).peakRssMb = nats.hwmMb;
}
