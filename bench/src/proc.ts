import { readFileSync } from 'node:fs';

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

const mb = (kb: number) => Math.round((kb / 1024) * 10) / 10;

/**
 * The memory of `pid`, or undefined when it is gone. A zombie (exited, not reaped yet) has a
 * status file without VmRSS, so it counts as gone too.
 */
export function readMemory(pid: number | undefined): ProcessMemory | undefined {
  if (!pid) return undefined;
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const rss = kbField(status, 'VmRSS');
  const hwm = kbField(status, 'VmHWM');
  if (rss === undefined || hwm === undefined) return undefined;
  return { pid, rssMb: mb(rss), hwmMb: mb(hwm) };
}

export const roundMb = (value: number) => Math.round(value * 10) / 10;
