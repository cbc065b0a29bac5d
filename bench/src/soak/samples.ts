import { type Component, components, type Mesh } from '@switchboard/runtime/dev/mesh';
import { readMemory } from '../measure/proc.js';

export interface Sample {
  /** Seconds into the load. */
  at: number;
  rssMb: Partial<Record<Component, number>>;
  /** V8's old space in use (prom-client's nodejs_heap_space_size_used_bytes{space="old"}), MB. */
  oldSpaceMb: Partial<Record<Component, number>>;
  /** RSS less the heap V8 has reserved (nodejs_heap_size_total_bytes): native memory, MB. */
  outsideHeapMb: Partial<Record<Component, number>>;
}

/** Of a component's V8 heap now, from its /metrics: the old space in use and the whole heap reserved, MB. */
async function v8Heap(metricsUrl: string): Promise<{ oldSpaceMb?: number; totalMb?: number }> {
  const text = await fetch(metricsUrl, { signal: AbortSignal.timeout(2000) })
    .then((response) => response.text())
    .catch(() => '');
  const megabytes = (pattern: RegExp) => {
    const match = pattern.exec(text);
    return match ? Number(match[1]) / 2 ** 20 : undefined;
  };
  return {
    oldSpaceMb: megabytes(/^nodejs_heap_space_size_used_bytes\{[^}]*space="old"[^}]*\} (\d+)/m),
    totalMb: megabytes(/^nodejs_heap_size_total_bytes(?:\{[^}]*\})? (\d+)/m),
  };
}

/** Every component's RSS, old space and memory outside the V8 heap now, `at` seconds into the load. */
export async function sampleMemory(mesh: Mesh, at: number): Promise<Sample> {
  const rssMb: Sample['rssMb'] = {};
  const oldSpace: Sample['oldSpaceMb'] = {};
  const outsideHeap: Sample['outsideHeapMb'] = {};
  for (const component of components) {
    const heap = await v8Heap(mesh.metricsUrls[component]);
    const memory = readMemory(mesh.pid(component));
    if (memory) rssMb[component] = memory.rssMb;
    oldSpace[component] = heap.oldSpaceMb;
    if (memory && heap.totalMb !== undefined) outsideHeap[component] = memory.rssMb - heap.totalMb;
  }
  return { at, rssMb, oldSpaceMb: oldSpace, outsideHeapMb: outsideHeap };
}
