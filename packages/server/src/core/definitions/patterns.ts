/** `SEARCH.*` matches `SEARCH.WEB`; `*` matches anything; otherwise exact. */
export function matchesPattern(pattern: string, value: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('*')) return value.startsWith(pattern.slice(0, -1));
  return pattern === value;
}
