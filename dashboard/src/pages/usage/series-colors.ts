import { otherGroup } from './usage-groups';

/** Distinct colours for the chart's series, in order; `Other` is grey. */
const palette = ['#1f4fd1', '#b35900', '#0f7b6c', '#7a3eb1', '#c0266d', '#5c6f00', '#006d9c', '#8c4a2f'];

/** The colour of the `index`-th series (the table's swatches use the same). */
export function seriesColor(name: string, index: number): string {
  return name === otherGroup ? '#8c959f' : palette[index % palette.length];
}
