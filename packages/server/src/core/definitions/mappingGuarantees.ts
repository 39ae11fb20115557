/**
 * Publish-time promise behind required mappings: a task whose input passes the workflow's inputSchema
 * never fails because a mapped value is missing. A REQUIRED reference (a plain `$.…` string) must read a
 * value the schema guarantees; one that could be absent must be marked optional or given a default
 * (`references.ts`). Pure: the schemas are read as data, nothing is compiled.
 */
import type { FieldError, StepDefinition } from '@tdp/protocol';
import { mappingEntry, parseMappingReference } from './references.ts';

type Schema = Record<string, unknown>;

/** The output schema of a step's capability when publish knows it; undefined leaves it to run time. */
export type OutputSchemaOf = (step: StepDefinition) => Schema | undefined;

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const saysObject = (schema: Schema) =>
  schema.type === 'object' ||
  (Array.isArray(schema.type) && schema.type.length === 1 && schema.type[0] === 'object');

/**
 * Whether every value passing `schema` has `path`. A key is guaranteed only where the schema both makes
 * the value an object and lists the key in `required`, at every level; `allOf` adds up, `anyOf`/`oneOf`
 * guarantee what all their branches do. `$ref`, `if`, arrays and the like are not followed: not
 * guaranteed (mark the mapping optional).
 */
export function schemaGuarantees(schema: unknown, path: string[], objectKnown = false): boolean {
  if (path.length === 0) return true;
  if (!isSchema(schema)) return false;
  const isObject = objectKnown || saysObject(schema);
  const [key, ...rest] = path as [string, ...string[]];
  const required = Array.isArray(schema.required) && schema.required.includes(key);
  if (isObject && required) {
    if (rest.length === 0) return true;
    const properties = isSchema(schema.properties) ? schema.properties : {};
    if (Object.hasOwn(properties, key) && schemaGuarantees(properties[key], rest)) return true;
  }
  const all = (name: string) => (Array.isArray(schema[name]) ? (schema[name] as unknown[]) : []);
  if (all('allOf').some((member) => schemaGuarantees(member, path, isObject))) return true;
  for (const name of ['anyOf', 'oneOf']) {
    const branches = all(name);
    if (branches.length > 0 && branches.every((member) => schemaGuarantees(member, path, isObject)))
      return true;
  }
  return false;
}

/** The mappings of a step with their JSON Pointer (its own, a map's and a child task's). */
function mappingsOf(step: StepDefinition, index: number): [Record<string, unknown>, string][] {
  const found: [Record<string, unknown>, string][] = [[step.inputMapping, `/steps/${index}/inputMapping`]];
  if (step.map?.inputMapping) found.push([step.map.inputMapping, `/steps/${index}/map/inputMapping`]);
  if (step.task?.inputMapping) found.push([step.task.inputMapping, `/steps/${index}/task/inputMapping`]);
  return found;
}

/**
 * Every REQUIRED reference of the steps' mappings (a plain `$.…` string), with the step, the field and
 * the JSON Pointer of the mapping; `$.item…` in a map is the item's own and not among them.
 */
function* requiredReferences(steps: StepDefinition[]) {
  for (const [index, step] of steps.entries())
    for (const [mapping, basePath] of mappingsOf(step, index))
      for (const [field, value] of Object.entries(mapping)) {
        const entry = mappingEntry(value);
        if (entry.kind !== 'reference' || entry.whenAbsent !== 'fail') continue;
        const source = parseMappingReference(entry.from);
        if (source === null || source === 'invalid') continue;
        yield { step, field, from: entry.from, source, path: `${basePath}/${field}` };
      }
}

/**
 * The required mappings that could read nothing in a task whose input passes `inputSchema`, one error
 * each, naming the step, the field and the path. A workflow without an inputSchema (`{}`) promises
 * nothing about its input and is not checked; `$.steps.<key>.output…` is checked only where
 * `outputSchemaOf` knows that step's output schema.
 */
export function unguaranteedMappings(
  steps: StepDefinition[],
  inputSchema: Schema,
  outputSchemaOf: OutputSchemaOf = () => undefined,
): FieldError[] {
  const inputDeclared = Object.keys(inputSchema).length > 0;
  const errors: FieldError[] = [];
  for (const { step, field, from, source, path } of requiredReferences(steps)) {
    const upstream = source.kind === 'input' ? undefined : steps.find((s) => s.key === source.stepKey);
    const schema =
      source.kind === 'input'
        ? inputDeclared
          ? inputSchema
          : undefined
        : upstream && outputSchemaOf(upstream);
    if (!schema || schemaGuarantees(schema, source.path)) continue;
    const what =
      source.kind === 'input'
        ? "the workflow's inputSchema"
        : `the output schema of step "${source.stepKey}"`;
    errors.push({
      path,
      message:
        `step "${step.key}" maps "${field}" from ${from}, which ${what} does not require, so a ` +
        `valid task may not have it: mark it optional ({ "from": "${from}", "optional": true }) ` +
        `or give it a default ({ "from": "${from}", "default": … }), or make it required in the schema`,
    });
  }
  return errors;
}

/**
 * A workflow without an inputSchema promises nothing about its input, so its required `$.input…`
 * mappings are not refused; but a task that leaves one out fails at run time. Publish names each one
 * (a warning) so the developer declares the input or marks the mapping optional. `$.input` itself is
 * always there (an input left out is `{}`).
 */
export function undeclaredInputMappings(
  steps: StepDefinition[],
  inputSchema: Schema,
): { stepKey: string; path: string; message: string }[] {
  if (Object.keys(inputSchema).length > 0) return [];
  return [...requiredReferences(steps)]
    .filter(({ source }) => source.kind === 'input' && source.path.length > 0)
    .map(({ step, field, from, path }) => ({
      stepKey: step.key,
      path,
      message:
        `step ${step.key} maps "${field}" from ${from}, and the workflow has no inputSchema: a task ` +
        'without it fails at run time; declare the input (inputSchema with required) or mark the mapping optional',
    }));
}
