import { readFileSync } from 'node:fs';
import { round } from './latency.js';

/** Memory of one process from /proc/<pid>/status, in MiB (Linux only). */
export interface ProcessMemory {
  pid: number;
  /** Resident set size now (VmRSS). */
  rssMb: number;
  /** Peak resident set size since the process started (VmHWM). */
  hwmMb: number;
}

const kbField = (status: string, field: string): number | undefined => {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status);
  return match ? Number(match[1]) : undefined;
};

/** /proc/<pid>/<file>, or undefined when there is no such process (any more). */
function readProcFile(pid: number, file: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8');
  } catch {
    return undefined;
  }
}

const mb = (kb: number) => round(kb / 1024, 1);

/**
 * The memory of `pid`, or undefined when it is gone. A zombie (exited, not reaped yet) has a
 * status file without VmRSS, so it counts as gone too.
 */
export function readMemory(pid: number | undefined): ProcessMemory | undefined {
  if (!pid) return undefined;
  const status = readProcFile(pid, 'status');
  if (status === undefined) return undefined;
  const rss = kbField(status, 'VmRSS');
  const hwm = kbField(status, 'VmHWM');
  if (rss === undefined || hwm === undefined) return undefined;
  return { pid, rssMb: mb(rss), hwmMb: mb(hwm) };
}

/** Clock ticks per second of /proc times (USER_HZ): 100 on every mainstream Linux build. */
const ticksPerSecond = 100;

/** CPU seconds (user + system) a process has used so far, or undefined when it is gone. */
function readCpuSeconds(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  const stat = readProcFile(pid, 'stat');
  if (stat === undefined) return undefined;
  // The command name (field 2) may contain spaces: count fields after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/** Busy and total CPU seconds of the whole host so far (all cores, from /proc/stat). */
function readHostCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const [user, nice, system, idle, iowait, irq, softirq, steal] = values;
  const busy = user + nice + system + irq + softirq + (steal ?? 0);
  return { busy: busy / ticksPerSecond, total: (busy + idle + iowait) / ticksPerSecond };
}

/**
 * CPU use of groups of processes over an interval, as % of one core per group, and of the host
 * as % of all its cores: call it before, call what it returns after. A process that is gone by
 * then counts for nothing.
 */
export function cpuMeter(groups: Record<string, Array<number | undefined>>) {
  const cpuOf = (pids: Array<number | undefined>) => pids.map((pid) => readCpuSeconds(pid));
  const before = Object.fromEntries(Object.entries(groups).map(([name, pids]) => [name, cpuOf(pids)]));
  const hostBefore = readHostCpu();
  const started = performance.now();
  return (): CpuUse => {
    const seconds = (performance.now() - started) / 1000;
    const hostAfter = readHostCpu();
    const processes: Record<string, number> = {};
    for (const [name, pids] of Object.entries(groups)) {
      const after = cpuOf(pids);
      let used = 0;
      after.forEach((value, i) => {
        const start = before[name][i];
        if (value !== undefined && start !== undefined) used += value - start;
      });
      processes[name] = Math.round((used / seconds) * 100);
    }
    const total = hostAfter.total - hostBefore.total;
    return { processes, hostBusyPercent: total > 0 ? Math.round(((hostAfter.busy - hostBefore.busy) / total) * 100) : 0 };
  };
}

export interface CpuUse {
  /** % of one core, per process. */
  processes: Record<string, number>;
  /** % of all the host's cores. */
  hostBusyPercent: number;
}

/** CPU use over several runs, each weighted by its duration. */
export function weightedCpu(parts: Array<{ cpu: CpuUse; seconds: number }>): CpuUse {
  const total = parts.reduce((sum, part) => sum + part.seconds, 0);
  const processes: Record<string, number> = {};
  for (const part of parts) {
    for (const [name, percent] of Object.entries(part.cpu.processes)) processes[name] = (processes[name] ?? 0) + (percent * part.seconds) / total;
  }
  const hostBusyPercent = parts.reduce((sum, part) => sum + part.cpu.hostBusyPercent * part.seconds, 0) / total;
  return {
    processes: Object.fromEntries(Object.entries(processes).map(([name, percent]) => [name, Math.round(percent)])),
    hostBusyPercent: Math.round(hostBusyPercent),
  };
}

/** CPU µs a process spent per unit of work, from its % of one core over a run and the run's units per second. */
export const cpuMicrosPer = (percent: number | undefined, perSecond: number) =>
  percent !== undefined && perSecond > 0 ? Math.round(((percent / 100) * 1e6) / perSecond) : undefined;
