/**
 * The SDK for capabilities: what a step's code sees. A capability is a name, a version, TypeBox schemas
 * for its input and output, and `run(ctx, input)`. The runtime validates the input before `run` and the
 * output after it, and turns what `run` throws into the step's failure.
 */
import type { Static, TSchema } from 'typebox';

/** Progress as a step reports it: percent rises only; a phase names what it is doing now. */
export interface ProgressUpdate {
  phase?: string;
  message?: string;
}

export interface AttemptLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export interface CapabilityContext<Checkpoint = unknown> {
  attemptId: string;
  taskId: string;
  /** The step's key in its task (what REST shows as a step's `key`). */
  stepKey: string;
  /** @deprecated use stepKey */
  stepId: string;
  /** 1 for the first try of the step, 2 for its first retry… */
  attempt: number;
  /**
   * Reports progress (0–100). Throttled to one report per second per attempt unless the phase changes;
   * the newest value always gets out before the step's final event.
   */
  progress(percent: number, update?: ProgressUpdate): void;
  /** Stores resumable state locally, durably: after a restart, `checkpoint` is what was last stored. */
  saveCheckpoint(data: Checkpoint): void;
  /** The last stored checkpoint of this attempt (after a restart), or null. */
  readonly checkpoint: Checkpoint | null;
  /**
   * Downloads a resource of the application (through a grant from its resource provider) into this
   * attempt's work directory; returns the local path.
   */
  download(resourceRef: string): Promise<string>;
  /**
   * Allocates an output: write the file at `path`, then `upload()` it; the result names the new
   * resource (`resourceRef`) to return in the step's output.
   */
  allocateOutput(spec: OutputSpec): Promise<OutputFile>;
  /** A folder for this attempt's files (0700), made when first read and removed when the attempt ends. */
  workDirectory: string;
  /** Aborted when the attempt is cancelled, its lease is lost, or the worker hands it back. */
  signal: AbortSignal;
  log: AttemptLogger;
}

export interface OutputSpec {
  /** Where the file goes among the task's outputs, e.g. `clean/photos.zip`. */
  relativePath: string;
  mediaType: string;
  maxBytes: number;
  /** What kind of artifact it is (default `FILE`). */
  artifactType?: string;
}

export interface OutputFile {
  path: string;
  resourceRef: string;
  upload(): Promise<{ resourceRef: string; bytes: number }>;
}

/**
 * A failure a capability chooses: its code, whether trying again could help, a message for the person
 * who submitted the work (a short sentence: what failed, what to do) and, in `detail`, the technical
 * text for developers (a refused request, another service's answer), which people are never shown.
 */
export class CapabilityError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly options: {
      retryable?: boolean;
      category?: string;
      detail?: string;
      details?: Record<string, unknown>;
    } = {},
  ) {
    super(message);
    this.name = 'CapabilityError';
  }
}

export interface Capability<
  I extends TSchema = TSchema,
  O extends TSchema = TSchema,
  Name extends string = string,
> {
  /** Kept as its literal type, so that `CatalogueOf` in @tdp/sdk can list the capability by name. */
  name: Name;
  version: string;
  input: I;
  output: O;
  /** Whether `run` can pick up from `ctx.checkpoint` after the worker restarted mid-attempt. */
  resumable?: boolean;
  /**
   * At most this many attempts of this capability at once on a worker, within the worker's own limit
   * (which suits I/O-bound steps): set it for a CPU- or memory-bound capability, e.g. to the number of
   * CPUs. The server places no more than this on the worker.
   */
  maxConcurrency?: number;
  /**
   * `NoInfer`: the schemas alone decide `I` and `O`. Left to infer them back from `run` through
   * TypeBox's `Static`, TypeScript spent ~650,000 type instantiations per `defineCapability` (seconds
   * of `tsc`); packages/sdk/test/fastTypes.test.ts keeps it cheap.
   */
  run(ctx: CapabilityContext, input: NoInfer<Static<I>>): Promise<NoInfer<Static<O>>>;
}

/** Declares a capability; the types of `run`'s input and result follow from the schemas. */
export function defineCapability<I extends TSchema, O extends TSchema, const Name extends string>(
  capability: Capability<I, O, Name>,
): Capability<I, O, Name> {
  if (!/^[a-z][a-z0-9_.-]*$/.test(capability.name)) {
    throw new Error(
      `capability name ${JSON.stringify(capability.name)} must be lowercase, e.g. image.watermark`,
    );
  }
  const limit = capability.maxConcurrency;
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000))
    throw new Error(`capability ${capability.name}: maxConcurrency must be an integer from 1 to 1000`);
  return capability;
}
