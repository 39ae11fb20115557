/**
 * `defineWorkflow()`: a workflow definition in TypeScript, step by step, in the shape the server's
 * publish accepts. The types check what they can before the server does:
 * - a step key is new, and `dependsOn` names only steps defined before it (so no cycle either);
 * - an input mapping reads `$.input…`, or `$.steps.<key>.output…` of a step upstream of this one
 *   (through `dependsOn`), and only output fields that exist when that step's capability is in the
 *   `CapabilityCatalogue`;
 * - for a catalogued capability, the mapping's fields are its input's, its required ones are all
 *   there, and a literal value (or an entry's `default`) has the field's type;
 * - a reference to a value that may be absent is written `{ from, optional: true }` or
 *   `{ from, default }` (`MappingEntry`); a plain reference is required;
 * - a map step's `items` reads an array, and its mapping's `$.item…` a path of the array's element
 *   (both where the type is known: a catalogued output, a TypeBox input schema).
 * The server still validates everything at publish (WORKFLOW_DEFINITION_INVALID).
 */
import type { PublishWorkflowDefinitionRequest } from '@tdp/protocol';
import type { Static } from 'typebox';
import type { CapabilityCatalogue } from './catalogue.ts';

type StepDefinitionInput = PublishWorkflowDefinitionRequest['steps'][number];

/** A step's settings besides its wiring: affinity, timeouts, retry, failurePolicy, startDelayMs. */
export type StepSettings = Omit<
  StepDefinitionInput,
  | 'key'
  | 'capability'
  | 'capabilityVersion'
  | 'dependsOn'
  | 'inputMapping'
  | 'kind'
  | 'sleep'
  | 'signal'
  | 'approval'
  | 'map'
  | 'task'
>;

/** The step kinds TDP runs itself (docs/step-kinds.md), each with its options under its own name. */
export type BuiltInKind = 'sleep' | 'signal' | 'approval' | 'map' | 'task';

/** One built-in step, as `.builtIn(key, spec)` takes it. */
export type BuiltInSpec<Kind extends BuiltInKind, DependsOn> = Omit<StepSettings, 'affinity' | 'timeouts'> & {
  kind: Kind;
  dependsOn?: DependsOn;
} & { [K in Kind]-?: NonNullable<StepDefinitionInput[K]> };

/** What the types remember of a defined step: its output's type and every step upstream of it. */
interface StepFacts {
  output: unknown;
  upstream: string;
}

type InputOf<C> = C extends keyof CapabilityCatalogue
  ? CapabilityCatalogue[C]['input']
  : Record<string, unknown>;
type OutputOf<C> = C extends keyof CapabilityCatalogue ? CapabilityCatalogue[C]['output'] : unknown;

/** Dotted paths into an object type, three levels deep (arrays are not entered). */
type PathsOf<T, Depth extends unknown[] = []> = Depth['length'] extends 3
  ? never
  : T extends readonly unknown[]
    ? never
    : T extends object
      ? { [K in keyof T & string]: K | `${K}.${PathsOf<NonNullable<T[K]>, [...Depth, unknown]>}` }[keyof T &
          string]
      : never;

/** References to a step's output: any path when its output type is unknown, else only existing ones. */
type OutputReference<Key extends string, Output> = unknown extends Output
  ? `$.steps.${Key}.output` | `$.steps.${Key}.output.${string}`
  : `$.steps.${Key}.output` | `$.steps.${Key}.output.${PathsOf<Output>}`;

/** What a step's mapping may read: the task input, and the outputs of the steps upstream of it. */
export type MappingReference<Steps extends Record<string, StepFacts>, Upstream extends string> =
  | '$.input'
  | `$.input.${string}`
  | {
      [K in Upstream & keyof Steps & string]: OutputReference<K, Steps[K]['output']>;
    }[Upstream & keyof Steps & string];

type RequiredKeys<T> = { [K in keyof T]-?: Record<never, never> extends Pick<T, K> ? never : K }[keyof T];

/**
 * A mapping entry for a value that may be absent (docs/step-kinds.md#input-mappings): left out of the
 * step's input (`optional: true`), or replaced by `default`. A plain reference string is required.
 */
export type MappingEntry<Reference = `$.${string}`, FieldType = unknown> =
  | { from: Reference; optional: true }
  | { from: Reference; default: FieldType };

/**
 * A value starting with `$.` must be a reference it may read, as must the `from` of a `MappingEntry`;
 * anything else is a literal of the field's type.
 */
type CheckedValue<Value, Reference, FieldType> = Value extends `$.${string}`
  ? Value extends Reference
    ? Value
    : Reference
  : Value extends { from: `$.${string}` }
    ? Value extends MappingEntry<Reference, FieldType>
      ? Value
      : MappingEntry<Reference, FieldType>
    : Value extends FieldType
      ? Value
      : FieldType;

/** A mapping checked against the capability's input and what the step may read. */
export type CheckedMapping<Mapping, Input, Reference> = {
  [Field in keyof Mapping]: Field extends keyof Input
    ? CheckedValue<Mapping[Field], Reference, Input[Field]>
    : never;
} & { [Field in RequiredKeys<Input>]: unknown };

type UpstreamOf<Steps extends Record<string, StepFacts>, DependsOn extends readonly string[]> =
  | DependsOn[number]
  | Steps[DependsOn[number] & keyof Steps]['upstream'];

/** Dotted paths into an object type, three levels deep, that lead to an array (arrays are not entered). */
type ArrayPathsOf<T, Depth extends unknown[] = []> = Depth['length'] extends 3
  ? never
  : T extends readonly unknown[]
    ? never
    : T extends object
      ? {
          [K in keyof T & string]:
            | (NonNullable<T[K]> extends readonly unknown[] ? K : never)
            | `${K}.${ArrayPathsOf<NonNullable<T[K]>, [...Depth, unknown]>}`;
        }[keyof T & string]
      : never;

/** An array reference into a value of type T at `prefix`: any path when T is unknown. */
type ArrayReference<Prefix extends string, T> = unknown extends T
  ? Prefix | `${Prefix}.${string}`
  : (T extends readonly unknown[] ? Prefix : never) | `${Prefix}.${ArrayPathsOf<T>}`;

/**
 * What a map's `items` may read: an array in the task input or in the output of a step upstream (paths
 * into an unknown type are not checked).
 */
export type ItemsReference<Steps extends Record<string, StepFacts>, Upstream extends string, Input> =
  | ArrayReference<'$.input', Input>
  | {
      [K in Upstream & keyof Steps & string]: ArrayReference<`$.steps.${K}.output`, Steps[K]['output']>;
    }[Upstream & keyof Steps & string];

/** The type at a dotted path of T (`unknown` when T is). */
type AtPath<T, Path extends string> = unknown extends T
  ? unknown
  : Path extends `${infer Head}.${infer Rest}`
    ? Head extends keyof T
      ? AtPath<NonNullable<T[Head]>, Rest>
      : unknown
    : Path extends keyof T
      ? T[Path]
      : unknown;

/** The element type of the array an `items` reference reads. */
type ItemOf<Steps extends Record<string, StepFacts>, Input, Items> = (
  Items extends '$.input'
    ? Input
    : Items extends `$.input.${infer Path}`
      ? AtPath<Input, Path>
      : Items extends `$.steps.${infer K}.output${infer Rest}`
        ? K extends keyof Steps
          ? Rest extends `.${infer Path}`
            ? AtPath<Steps[K]['output'], Path>
            : Steps[K]['output']
          : unknown
        : unknown
) extends infer List
  ? NonNullable<List> extends readonly (infer Item)[]
    ? Item
    : unknown
  : unknown;

/** `$.item` (the whole item) and `$.item.<field>…`: any path when the item's type is unknown. */
type ItemReference<Item> = unknown extends Item
  ? '$.item' | `$.item.${string}`
  : '$.item' | `$.item.${PathsOf<Item>}`;

/** What to do when an item fails for good (docs/step-kinds.md#map). */
export type OnItemFailure = 'FAIL_ALL' | 'CONTINUE';

/**
 * A map step's output, as the server assembles it in item order: under FAIL_ALL the items' outputs
 * (an absent one as null), under CONTINUE one `{ output }` or `{ error }` per item.
 */
export type MapOutput<ItemOutput, Policy extends OnItemFailure> = Policy extends 'CONTINUE'
  ? ({ output: NullIfAbsent<ItemOutput> } | { error: { code: string; message?: string } })[]
  : NullIfAbsent<ItemOutput>[];
type NullIfAbsent<T> = undefined extends T ? Exclude<T, undefined> | null : T;

/** One map step, as `.map(key, spec)` takes it: its settings apply to every item's attempts. */
export type MapSpec<Capability extends string, DependsOn, Items, Mapping, Policy> = StepSettings & {
  /** Steps (defined earlier) that must succeed before the map starts. */
  dependsOn?: DependsOn;
  /** The array to run over: `$.input…` or `$.steps.<key>.output…` of a step upstream. */
  items: Items;
  /** The capability each item runs, e.g. `video.detect`. */
  capability: Capability;
  capabilityVersion: string;
  /** At most this many items run at once (1–10,000); without it, as many as the workers take. */
  maxParallel?: number;
  /** `FAIL_ALL` (the default): the first item failing for good fails the step; `CONTINUE`: every item runs. */
  onItemFailure?: Policy;
} & ([RequiredKeys<InputOf<Capability>>] extends [never]
    ? { inputMapping?: Mapping }
    : { inputMapping: Mapping });

/** One step, as `.step(key, spec)` takes it. */
export type StepSpec<Capability extends string, DependsOn, Mapping> = StepSettings & {
  /** The capability's name, e.g. `archive.clean`. */
  capability: Capability;
  capabilityVersion: string;
  /** Steps (defined earlier) that must succeed before this one starts. */
  dependsOn?: DependsOn;
} & ([RequiredKeys<InputOf<Capability>>] extends [never]
    ? { inputMapping?: Mapping }
    : { inputMapping: Mapping });

/**
 * A workflow definition ready to publish (`client.publishWorkflowDefinition(workflow)`). Its types say
 * what a task of it takes (`Input`) and what its steps give, by step key (`Outputs`), for the client's
 * `createTask(workflow, …)`, `waitForResult(workflow, …)` and typed callback handlers.
 */
export interface DefinedWorkflow<Input = unknown, Outputs = Record<string, unknown>> {
  readonly definition: PublishWorkflowDefinitionRequest;
  /** Types only: never set at run time. */
  readonly '~types'?: { input: Input; outputs: Outputs };
}

/** What a task of the workflow takes as `input` (`unknown` when its input schema is not TypeBox). */
export type WorkflowInput<W extends DefinedWorkflow> = NonNullable<W['~types']>['input'];

/** Each step's output, by step key (`unknown` for a capability not in the catalogue and built-in steps). */
export type WorkflowOutputs<W extends DefinedWorkflow> = NonNullable<W['~types']>['outputs'];

/** A TypeBox schema gives its static type; a plain JSON Schema (or none) leaves the input `unknown`. */
type InputFromSchema<Schema> = Schema extends { '~kind': string } ? Static<Schema> : unknown;

type StepOutputs<Steps extends Record<string, StepFacts>> = {
  [K in keyof Steps]: Steps[K]['output'];
};

export class WorkflowBuilder<
  Steps extends Record<string, StepFacts> = Record<never, StepFacts>,
  Input = unknown,
> implements DefinedWorkflow<Input, StepOutputs<Steps>>
{
  declare readonly '~types'?: { input: Input; outputs: StepOutputs<Steps> };

  constructor(readonly definition: PublishWorkflowDefinitionRequest) {}

  /** Adds a step after the ones defined so far; returns a new builder (this one is unchanged). */
  step<
    const Key extends string,
    const Capability extends string,
    const Mapping extends CheckedMapping<
      Mapping,
      InputOf<Capability>,
      MappingReference<Steps, UpstreamOf<Steps, DependsOn>>
    >,
    const DependsOn extends readonly (keyof Steps & string)[] = [],
  >(
    key: Key extends keyof Steps ? never : Key,
    spec: StepSpec<Capability, DependsOn, Mapping>,
  ): WorkflowBuilder<
    Steps & { [K in Key]: { output: OutputOf<Capability>; upstream: UpstreamOf<Steps, DependsOn> } },
    Input
  > {
    const { dependsOn, inputMapping, ...settings } = spec as StepSettings & {
      capability: string;
      capabilityVersion: string;
      dependsOn?: readonly string[];
      inputMapping?: Record<string, unknown>;
    };
    const step: StepDefinitionInput = {
      key,
      ...settings,
      ...(dependsOn ? { dependsOn: [...dependsOn] } : {}),
      ...(inputMapping ? { inputMapping: { ...inputMapping } } : {}),
    };
    return new WorkflowBuilder({ ...this.definition, steps: [...this.definition.steps, step] });
  }

  /**
   * Adds a map step: the capability runs once per item of the array `items` reads, each item's input
   * built by `inputMapping`, which may also read the item (`$.item`, `$.item.<field>…`). Where the types
   * are known, `items` must be an array and `$.item…` a path of its element; the step's output is the
   * list of item outputs (`MapOutput`).
   */
  map<
    const Key extends string,
    const Capability extends string,
    const Items extends ItemsReference<Steps, UpstreamOf<Steps, DependsOn>, Input>,
    const Mapping extends CheckedMapping<
      Mapping,
      InputOf<Capability>,
      MappingReference<Steps, UpstreamOf<Steps, DependsOn>> | ItemReference<ItemOf<Steps, Input, Items>>
    >,
    const DependsOn extends readonly (keyof Steps & string)[] = [],
    const Policy extends OnItemFailure = 'FAIL_ALL',
  >(
    key: Key extends keyof Steps ? never : Key,
    spec: MapSpec<Capability, DependsOn, Items, Mapping, Policy>,
  ): WorkflowBuilder<
    Steps & {
      [K in Key]: {
        output: MapOutput<OutputOf<Capability>, Policy>;
        upstream: UpstreamOf<Steps, DependsOn>;
      };
    },
    Input
  > {
    const {
      dependsOn,
      items,
      capability,
      capabilityVersion,
      inputMapping,
      maxParallel,
      onItemFailure,
      ...settings
    } = spec as MapSpec<string, readonly string[], string, Record<string, unknown>, OnItemFailure>;
    const step: StepDefinitionInput = {
      key,
      kind: 'map',
      ...settings,
      ...(dependsOn ? { dependsOn: [...dependsOn] } : {}),
      map: {
        items,
        capability,
        capabilityVersion,
        ...(inputMapping ? { inputMapping: { ...inputMapping } } : {}),
        ...(maxParallel !== undefined ? { maxParallel } : {}),
        ...(onItemFailure ? { onItemFailure } : {}),
      },
    };
    return new WorkflowBuilder({ ...this.definition, steps: [...this.definition.steps, step] });
  }

  /**
   * Adds a step TDP runs itself — a sleep, a signal, an approval or a child task — after the ones
   * defined so far. Its output is not typed: later steps may read any path of it. (A map is accepted
   * too, unchecked; `.map(key, spec)` checks it and types its output.)
   */
  builtIn<
    const Key extends string,
    const Kind extends BuiltInKind,
    const DependsOn extends readonly (keyof Steps & string)[] = [],
  >(
    key: Key extends keyof Steps ? never : Key,
    spec: BuiltInSpec<Kind, DependsOn>,
  ): WorkflowBuilder<
    Steps & { [K in Key]: { output: unknown; upstream: UpstreamOf<Steps, DependsOn> } },
    Input
  > {
    const { dependsOn, ...rest } = spec as BuiltInSpec<Kind, readonly string[]>;
    const step = { key, ...rest, ...(dependsOn ? { dependsOn: [...dependsOn] } : {}) } as StepDefinitionInput;
    return new WorkflowBuilder({ ...this.definition, steps: [...this.definition.steps, step] });
  }

  toJSON(): PublishWorkflowDefinitionRequest {
    return this.definition;
  }
}

/**
 * Starts a workflow definition; add its steps with `.step(key, spec)` in dependency order:
 *
 *   const zipWorkflow = defineWorkflow({ name: 'zip-clean-watermark', version: '1' })
 *     .step('clean', { capability: 'archive.clean', capabilityVersion: '1',
 *                      inputMapping: { source: '$.input.sourceZip' } })
 *     .step('watermark', { capability: 'image.watermark', capabilityVersion: '1', dependsOn: ['clean'],
 *                          inputMapping: { source: '$.steps.clean.output.archive', text: '$.input.text' } });
 */
export function defineWorkflow<Schema extends object = Record<string, unknown>>(
  header: Omit<PublishWorkflowDefinitionRequest, 'steps' | 'inputSchema'> & { inputSchema?: Schema },
): WorkflowBuilder<Record<never, StepFacts>, InputFromSchema<Schema>> {
  const { inputSchema, ...rest } = header;
  const definition: PublishWorkflowDefinitionRequest = {
    ...rest,
    // A TypeBox schema is JSON Schema as it is: its own markers (`~kind`) are not enumerable.
    ...(inputSchema ? { inputSchema: inputSchema as Record<string, unknown> } : {}),
    steps: [],
  };
  return new WorkflowBuilder(definition);
}

/** The request body of a publish, from a `defineWorkflow()` result or a plain definition. */
export function definitionOf(
  workflow: PublishWorkflowDefinitionRequest | DefinedWorkflow,
): PublishWorkflowDefinitionRequest {
  return 'definition' in workflow ? workflow.definition : workflow;
}
