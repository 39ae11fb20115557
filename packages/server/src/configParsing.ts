/** How config.ts (and the settings files beside it) read one environment variable. */

export class ConfigError extends Error {}

export function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new ConfigError(`${name} is required`);
  return value;
}

export function integer(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

export const truthy = (value: string | undefined) =>
  ['1', 'true', 'yes'].includes((value ?? '').toLowerCase());

/** A switch: `on` or `off` (any case), the fallback when unset. */
export function onOff(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const value = env[name]?.trim().toLowerCase();
  if (!value) return fallback;
  if (value !== 'on' && value !== 'off') throw new ConfigError(`${name} must be on or off`);
  return value === 'on';
}
