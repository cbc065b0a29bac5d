import type { ReactNode } from 'react';

export interface ExpandableRowProps {
  /** The row's cells but the last (the actions). */
  cells: ReactNode;
  /** How many columns the table has: the panel spans them all. */
  columns: number;
  /** The panel's element id (for `aria-controls`). */
  panelId: string;
  open: boolean;
  onToggle(): void;
  /** The toggle button's text when closed and when open, and what it is about (read after it, for screen readers); no button without it. */
  toggle?: { label: string; openLabel: string; target: string };
  /** More buttons in the actions cell. */
  actions?: ReactNode;
  /** What opens under the row. */
  panel: ReactNode;
  /** Attributes of the row (a `data-…` id for tests). */
  rowProps?: Record<string, string>;
}

/** A row of a `data-table` whose button opens a panel under it, across the whole table. */
export function ExpandableRow({ cells, columns, panelId, open, onToggle, toggle, actions, panel, rowProps }: ExpandableRowProps) {
  return (
    <>
      <tr {...rowProps}>
        {cells}
        <td className="actions">
          {toggle && (
            <button type="button" className="button" aria-expanded={open} aria-controls={open ? panelId : undefined} onClick={onToggle}>
              {open ? toggle.openLabel : toggle.label}
              <span className="visually-hidden"> {toggle.target}</span>
            </button>
          )}
          {actions}
        </td>
      </tr>
      {open && (
        <tr className="row-panel">
          <td colSpan={columns} id={panelId}>
            {panel}
          </td>
        </tr>
      )}
    </>
  );
}
