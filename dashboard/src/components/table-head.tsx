/** A column of `TableHead`: its title, and `number` for a right-aligned column of figures. */
export type Column = string | { title: string; number: true };

/**
 * The header row of a `data-table`; `actions` names, for screen readers only, a last column of
 * buttons (`Actions`, `Details`).
 */
export function TableHead({ columns, actions }: { columns: Column[]; actions?: string }) {
  return (
    <thead>
      <tr>
        {columns.map((column) =>
          typeof column === 'string' ? (
            <th key={column} scope="col">
              {column}
            </th>
          ) : (
            <th key={column.title} scope="col" className="number">
              {column.title}
            </th>
          ),
        )}
        {actions && (
          <th scope="col">
            <span className="visually-hidden">{actions}</span>
          </th>
        )}
      </tr>
    </thead>
  );
}
