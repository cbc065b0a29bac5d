/** A plain-text table, columns after the first `alignLeft` right-aligned. */
export function table(header: string[], rows: string[][], alignLeft = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i < alignLeft ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].map((l) => `  ${l}`).join('\n');
}
