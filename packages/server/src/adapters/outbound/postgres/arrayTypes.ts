/**
 * The array types TDP reads and binds, given to the driver up front. By default postgres.js learns array
 * types from a catalog query it runs first on every new connection, and drops that query's promise: a
 * connection reset or terminated during it became an unhandled rejection that killed the server
 * (porsager/postgres #1192, #1205, #1223). With `fetch_types: false` there is no such query; the
 * built-in types' OIDs are fixed by PostgreSQL, so these few are declared here instead.
 */
import { parse as parseArray } from 'postgres-array';

/** Each array type: its PostgreSQL OID, how one of its elements is read and, if not as text, written. */
const arrays: Record<
  string,
  { array: number; parse: (element: string) => unknown; write?: (element: unknown) => string }
> = {
  textArray: { array: 1009, parse: (x: string) => x },
  varcharArray: { array: 1015, parse: (x: string) => x },
  uuidArray: { array: 2951, parse: (x: string) => x },
  boolArray: { array: 1000, parse: (x: string) => x === 't' },
  int4Array: { array: 1007, parse: (x: string) => Number(x) },
  int8Array: { array: 1016, parse: (x: string) => BigInt(x) },
  float8Array: { array: 1022, parse: (x: string) => Number(x) },
  timestamptzArray: {
    array: 1185,
    parse: (x: string) => new Date(x),
    write: (x) => new Date(x as Date).toISOString(),
  },
  jsonArray: { array: 199, parse: (x: string) => JSON.parse(x), write: (x) => JSON.stringify(x) },
  jsonbArray: { array: 3807, parse: (x: string) => JSON.parse(x), write: (x) => JSON.stringify(x) },
};

/** A one-dimensional array literal; every element quoted, so any text survives. */
export function serializeArray(
  values: readonly unknown[],
  write: (element: unknown) => string = String,
): string {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    const value = values[i];
    if (i > 0) literal += ',';
    if (value === null || value === undefined) {
      literal += 'NULL';
      continue;
    }
    const text = write(value);
    // Most elements (ids, hashes, numbers) have nothing to escape; the test is cheaper than the replace.
    literal +=
      text.includes('"') || text.includes('\\') ? `"${text.replace(/[\\"]/g, '\\$&')}"` : `"${text}"`;
  }
  return `${literal}}`;
}

/** The driver's `types` option: each array type parsed from and bound as an array literal. */
export const arrayTypes = Object.fromEntries(
  Object.entries(arrays).map(([name, type]) => [
    name,
    {
      to: type.array,
      from: [type.array],
      serialize: (values: unknown[]) => serializeArray(values, type.write),
      parse: (text: string) => parseArray(text, type.parse),
    },
  ]),
);
