/**
 * Settings declared as schemas. Each feature declares its slice of the server's configuration as a
 * TypeBox object: every property is one setting with its type, default, description and the environment
 * variable it is read from. From the slices alone the server reads its configuration
 * (`readConfiguration`), writes docs/configuration.md (`configurationDoc`) and knows which `TDP_*`
 * variables are its own (`settingVariables`).
 */
import { type Static, type TObject, type TProperties, type TSchema, Type } from 'typebox';

export class ConfigError extends Error {}

/** How a flag reads its variable. */
type FlagForm =
  /** `on` or `off` (any case); anything else is refused. */
  | 'on-off'
  /** `1`, `true` or `yes` is on; anything else is off. */
  | 'truthy'
  /** Only `false` is off. */
  | 'unless-false';

interface Described {
  /** What the setting does, for people (docs/configuration.md). */
  description: string;
  /** The environment variable it is read from; none: set only by an embedder (or a test). */
  env?: string;
}

/** One of several variables of a setting, as docs/configuration.md lists it. */
interface OwnVariable {
  type?: string;
  default: string;
  description: string;
}

/**
 * A setting read by a function of the whole environment: several variables, or a format of its own.
 * `parse` returns undefined when none of its variables is set (the default then applies).
 */
interface CustomOptions<T> extends Described {
  /**
   * Every variable `parse` reads (for the docs and for knowing the server's own variables): names that
   * share the setting's description and default, or each with its own.
   */
  variables: string[] | Record<string, OwnVariable>;
  /** How docs/configuration.md names its type. */
  typeName: string;
  default?: T;
  /** How docs/configuration.md shows the default, when printing the value would not say it well. */
  defaultText?: string;
  parse: (env: NodeJS.ProcessEnv) => T | undefined;
}

/** The settings' kinds. Each returns a TypeBox schema whose static type is the setting's value. */
export const setting = {
  /** A non-negative integer. */
  integer: (options: Described & { default: number }) => Type.Integer({ minimum: 0, ...options }),
  string: (options: Described & { default: string }) => Type.String({ ...options }),
  /** A string that may be unset (null); an empty variable is unset too. */
  optionalString: (options: Described) =>
    Type.Union([Type.String(), Type.Null()], { default: null, ...options }),
  /** A required string: the server does not start without it. */
  requiredString: (options: Described & { env: string }) => Type.String({ ...options }),
  flag: (options: Described & { default: boolean; form: FlagForm }) => Type.Boolean({ ...options }),
  /** A value without a variable (a nested timing, a policy), set only by an embedder or a test. */
  value: <T>(options: { description: string; default: T }) => Type.Unsafe<T>({ kind: 'value', ...options }),
  custom: <T>(options: CustomOptions<T>) => Type.Unsafe<T>({ kind: 'custom', ...options }),
};

/** One feature's settings: its schema and the checks that span several settings. */
export interface SettingsSlice<S extends TObject = TObject> {
  schema: S;
  /**
   * Refuses a value or a combination (throws `ConfigError`), or completes a setting derived from others
   * (it may assign to `settings`); sees the whole configuration, read and defaulted.
   */
  check?: (settings: Static<S>, all: Readonly<Record<string, unknown>>) => void;
}

export const settingsSlice = <S extends TObject>(
  schema: S,
  check?: SettingsSlice<S>['check'],
): SettingsSlice<S> => (check ? { schema, check } : { schema });

interface SettingSchema {
  type?: string;
  kind?: string;
  env?: string;
  default?: unknown;
  description?: string;
  form?: FlagForm;
  anyOf?: { type: string }[];
  variables?: string[] | Record<string, OwnVariable>;
  typeName?: string;
  defaultText?: string;
  parse?: (env: NodeJS.ProcessEnv) => unknown;
}

const asSetting = (schema: TSchema) => schema as unknown as SettingSchema;

/** A non-negative integer from `name`, or the fallback when it is unset. */
export function integerVariable(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return value;
}

function flagVariable(raw: string, name: string, form: FlagForm): boolean {
  const value = raw.toLowerCase();
  if (form === 'truthy') return ['1', 'true', 'yes'].includes(value);
  if (form === 'unless-false') return value !== 'false';
  if (value !== 'on' && value !== 'off') throw new ConfigError(`${name} must be on or off`);
  return value === 'on';
}

/** One setting's value: the override when given (null included), else its variable, else its default. */
function readSetting(key: string, schema: SettingSchema, env: NodeJS.ProcessEnv, override: unknown): unknown {
  if (override !== undefined) return override;
  if (schema.kind === 'custom') {
    const parsed = schema.parse?.(env);
    return parsed !== undefined ? parsed : structuredClone(schema.default);
  }
  const raw = schema.env ? env[schema.env]?.trim() : undefined;
  const name = schema.env ?? key;
  if (schema.anyOf) return raw || (schema.default ?? null);
  if (!raw) {
    if ('default' in schema) return structuredClone(schema.default);
    throw new ConfigError(`${name} is required`);
  }
  if (schema.type === 'integer') return integerVariable(env, name, 0);
  if (schema.type === 'boolean') return flagVariable(raw, name, schema.form ?? 'on-off');
  return raw;
}

/** Reads one slice from the environment, over the defaults, under the overrides. */
function readSlice<S extends TObject>(
  slice: SettingsSlice<S>,
  env: NodeJS.ProcessEnv,
  overrides: Readonly<Record<string, unknown>>,
): Static<S> {
  const values: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(slice.schema.properties as TProperties))
    values[key] = readSetting(key, asSetting(schema), env, overrides[key]);
  return values as Static<S>;
}

/** The whole configuration: every slice read, then every slice's checks over the result. */
export function readConfiguration(
  slices: readonly SettingsSlice[],
  env: NodeJS.ProcessEnv,
  overrides: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const all: Record<string, unknown> = {};
  for (const slice of slices) Object.assign(all, readSlice(slice, env, overrides));
  // Values an embedder passes beside the slices' own (a test's extra field) are kept as given.
  for (const [key, value] of Object.entries(overrides)) if (!(key in all)) all[key] = value;
  checkConfiguration(slices, all);
  return all;
}

/**
 * Every slice's checks over a whole configuration (which they may complete): `readConfiguration` runs
 * them, and a server runs them again on the configuration it is given, before it connects anything.
 */
export function checkConfiguration(slices: readonly SettingsSlice[], all: Record<string, unknown>): void {
  for (const slice of slices) slice.check?.(all as never, all);
}

/** Every setting's default: what a configuration holds before the environment is read. */
export function sliceDefaults(slices: readonly SettingsSlice[]): Record<string, unknown> {
  const defaults: Record<string, unknown> = {};
  for (const slice of slices)
    for (const [key, schema] of Object.entries(slice.schema.properties as TProperties)) {
      const setting = asSetting(schema);
      if ('default' in setting) defaults[key] = structuredClone(setting.default);
    }
  return defaults;
}

/** One environment variable as docs/configuration.md lists it. */
export interface SettingVariable {
  variable: string;
  /** The configuration's field it sets. */
  field: string;
  type: string;
  /** As written in the docs: the value, `—` when unset by default, `required`. */
  default: string;
  description: string;
}

function typeName(schema: SettingSchema): string {
  if (schema.typeName) return schema.typeName;
  if (schema.anyOf) return 'string';
  if (schema.type === 'integer') return 'integer ≥ 0';
  if (schema.type === 'boolean')
    return schema.form === 'on-off' ? '`on` or `off`' : schema.form === 'truthy' ? 'flag (`true`)' : 'flag';
  return 'string';
}

function defaultText(schema: SettingSchema): string {
  if (schema.defaultText) return schema.defaultText;
  if (!('default' in schema)) return schema.kind === 'custom' ? '—' : 'required';
  const value = schema.default;
  if (value === null || value === undefined || value === '') return '—';
  if (typeof value === 'boolean' && schema.form === 'on-off') return value ? '`on`' : '`off`';
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

/** Every environment variable the slices read, in declaration order. */
export function settingVariables(slices: readonly SettingsSlice[]): SettingVariable[] {
  const variables: SettingVariable[] = [];
  for (const slice of slices)
    for (const [field, raw] of Object.entries(slice.schema.properties as TProperties)) {
      const schema = asSetting(raw);
      const listed = schema.variables;
      const own = listed && !Array.isArray(listed) ? listed : null;
      const names = own ? Object.keys(own) : Array.isArray(listed) ? listed : schema.env ? [schema.env] : [];
      for (const variable of names)
        variables.push({
          variable,
          field,
          type: own?.[variable]?.type ?? typeName(schema),
          default: own?.[variable]
            ? quoted(own[variable].default)
            : names.length > 1
              ? '—'
              : defaultText(schema),
          description: (own?.[variable]?.description ?? schema.description ?? '').replace(/\s+/g, ' ').trim(),
        });
    }
  return variables;
}

/** The `TDP_*` variables in `env` that no setting reads and `alsoKnown` does not name. */
export function unknownVariables(
  env: NodeJS.ProcessEnv,
  slices: readonly SettingsSlice[],
  alsoKnown: readonly string[] = [],
): string[] {
  const known = new Set([...settingVariables(slices).map((v) => v.variable), ...alsoKnown]);
  return Object.keys(env)
    .filter((name) => name.startsWith('TDP_') && !known.has(name))
    .sort();
}

/** A default as the docs show it: in backticks, or `—` for none. */
const quoted = (value: string) => (value === '—' ? value : `\`${value}\``);

const cell = (text: string) => text.replaceAll('|', '\\|');

/** docs/configuration.md: one table per feature, a row per variable. */
export function configurationDoc(features: readonly { name: string; settings?: SettingsSlice }[]): string {
  const lines = [
    '# Configuration',
    '',
    "<!-- Generated from the features' settings schemas by `npm run docs:config`; a test fails when it drifts. -->",
    '',
    'Every environment variable the server reads, by feature: its type, its default and what it does.',
    'A `TDP_*` variable that no setting reads is reported when the server starts (a misspelt name would',
    'otherwise be ignored in silence). Settings without a variable are set by embedders through',
    '`configFromEnv(env, overrides)`.',
  ];
  for (const feature of features) {
    if (!feature.settings) continue;
    const variables = settingVariables([feature.settings]);
    if (variables.length === 0) continue;
    lines.push(
      '',
      `## ${feature.name}`,
      '',
      '| variable | type | default | what it does |',
      '| --- | --- | --- | --- |',
    );
    for (const v of variables)
      lines.push(`| \`${v.variable}\` | ${cell(v.type)} | ${cell(v.default)} | ${cell(v.description)} |`);
  }
  return `${lines.join('\n')}\n`;
}
