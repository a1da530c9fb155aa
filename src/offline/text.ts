/** The text reports of replay and simulate: numbers as people read them, and aligned columns. */

/** A whole number with thousands separators: `1,234,567`. */
export function count(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

/**
 * Rows as aligned columns, the first row being the header: the first column left-aligned,
 * the others right-aligned (numbers), two spaces apart, each line after `indent`.
 */
export function textTable(rows: readonly (readonly string[])[], indent = ""): string {
  const columns = Math.max(0, ...rows.map((row) => row.length));
  const widths = Array.from({ length: columns }, (_, i) =>
    Math.max(...rows.map((row) => (row[i] ?? "").length)),
  );
  return rows
    .map((row) =>
      `${indent}${row
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
        .join("  ")}`.trimEnd(),
    )
    .join("\n");
}
