/**
 * A capability module: a module whose exports include capabilities, alone or in arrays (the built-in
 * one exports `builtinCapabilities`). Isolated attempts need one, because a runner process can import a
 * module but cannot be handed an object.
 */
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Capability } from '../sdk.ts';

/** The module's capabilities by `name@version`. */
export async function capabilitiesOf(module: string | URL): Promise<Map<string, Capability>> {
  const exports = (await import(moduleUrl(module))) as Record<string, unknown>;
  const found = new Map<string, Capability>();
  for (const value of Object.values(exports))
    for (const item of Array.isArray(value) ? value : [value])
      if (isCapability(item)) found.set(capabilityKey(item), item);
  if (found.size === 0) throw new Error(`${String(module)} exports no capability`);
  return found;
}

export const capabilityKey = (capability: { name: string; version: string }) =>
  `${capability.name}@${capability.version}`;

/** A file path (absolute) or a URL, as a string `import()` takes and a child process can be given. */
export function moduleUrl(module: string | URL): string {
  if (module instanceof URL) return module.href;
  return isAbsolute(module) ? pathToFileURL(module).href : module;
}

function isCapability(value: unknown): value is Capability {
  const candidate = value as Partial<Capability> | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.name === 'string' &&
    typeof candidate.version === 'string' &&
    typeof candidate.run === 'function'
  );
}
