/**
 * Temporal as the engine of `temporal` executions (docs/temporal.md): a Temporal worker in this process
 * runs the execution workflow and its activities, and a client starts, signals and cancels workflows
 * for the bridge. The workflow code is bundled once when the engine starts (Temporal's sandbox loads a
 * bundle); its imports are resolved from TDP's TypeScript sources under `@tdp/source`, or from dist/.
 */
import { fileURLToPath } from 'node:url';
import {
  Client,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { FactConsequenceDeps } from '../../core/orchestration/consequences.ts';
import { engineActivities } from './activities.ts';
import {
  type ExecutionInput,
  type StepFinished,
  type StepSleeping,
  stepFinished,
  stepSleeping,
} from './executionWorkflow.ts';

export interface TemporalSettings {
  address: string;
  namespace: string;
  taskQueue: string;
  /** How often the sweep starts the workflows Temporal may have lost (workflowSweep.ts); 60 s. */
  sweepIntervalMs?: number;
  /** An execution unchanged for this long is swept; 60 s. */
  sweepIdleMs?: number;
}

/** What the bridge asks of the engine; each call may be made again for the same event. */
export interface ExecutionDriver {
  start(input: ExecutionInput): Promise<void>;
  stepFinished(executionId: string, step: StepFinished): Promise<void>;
  stepSleeping(executionId: string, step: StepSleeping): Promise<void>;
  cancel(executionId: string): Promise<void>;
}

/** Temporal's runtime is one per process and logs to the console at INFO unless installed first. */
function quietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
  } catch {
    // Installed already (another engine in this process): that one's settings hold.
  }
}

/**
 * The execution workflow's code as Temporal's sandbox loads it: one bundle of executionWorkflow and its
 * imports, resolved from TDP's TypeScript sources under `@tdp/source`, or from dist/ (the replay test
 * replays recorded histories against this same bundle).
 */
export async function bundleExecutionWorkflow(): Promise<string> {
  const source = import.meta.url.endsWith('.ts');
  const workflowsPath = fileURLToPath(
    new URL(`./executionWorkflow.${source ? 'ts' : 'js'}`, import.meta.url),
  );
  const { code } = await bundleWorkflowCode({
    workflowsPath,
    logger: new DefaultLogger('WARN'),
    webpackConfigHook: (config) => ({
      ...config,
      resolve: { ...config.resolve, conditionNames: [...(source ? ['@tdp/source'] : []), '...'] },
    }),
  });
  return code;
}

export class TemporalEngine implements ExecutionDriver {
  private constructor(
    private readonly settings: TemporalSettings,
    private readonly client: Client,
    private readonly connection: NativeConnection,
    private readonly worker: Worker,
    private readonly running: Promise<void>,
  ) {}

  static async start(settings: TemporalSettings, deps: FactConsequenceDeps): Promise<TemporalEngine> {
    quietRuntime();
    const code = await bundleExecutionWorkflow();
    // One native connection for the worker and the client: its HTTP/2 runs in Rust, off the event
    // loop, and a start can hand its first workflow task straight to this worker (eager start).
    const connection = await NativeConnection.connect({ address: settings.address });
    try {
      const worker = await Worker.create({
        connection,
        namespace: settings.namespace,
        taskQueue: settings.taskQueue,
        workflowBundle: { code },
        activities: engineActivities(deps),
        // The workflow runs only local activities: no poller waits for remote ones.
        enableNonLocalActivities: false,
        // The workflow cache is the SDK's default, sized from this process's heap (about 600 runs per
        // GiB): an execution evicted from it is fetched and replayed at its next signal.
        workflowTaskPollerBehavior: { type: 'autoscaling' },
      });
      const client = new Client({ connection, namespace: settings.namespace });
      return new TemporalEngine(settings, client, connection, worker, worker.run());
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  async start(input: ExecutionInput): Promise<void> {
    try {
      await this.client.workflow.start('tdpExecution', {
        workflowId: input.executionId,
        taskQueue: this.settings.taskQueue,
        args: [input],
        // A redelivered create finds the workflow running (kept) or closed (refused): never a second one.
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        // Its first workflow task comes back in the answer, for this process's worker when it has a
        // free slot: one dispatch and one poll fewer per execution. Otherwise it is queued as usual.
        requestEagerStart: true,
      });
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  }

  async stepFinished(executionId: string, step: StepFinished): Promise<void> {
    await this.ignoringClosed(() => this.client.workflow.getHandle(executionId).signal(stepFinished, step));
  }

  async stepSleeping(executionId: string, step: StepSleeping): Promise<void> {
    await this.ignoringClosed(() => this.client.workflow.getHandle(executionId).signal(stepSleeping, step));
  }

  async cancel(executionId: string): Promise<void> {
    await this.ignoringClosed(() => this.client.workflow.getHandle(executionId).cancel());
  }

  /** A workflow that ended has nothing more to hear. */
  private async ignoringClosed(call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
  }

  async stop(): Promise<void> {
    if (this.worker.getState() === 'RUNNING') this.worker.shutdown();
    await this.running.catch(() => {});
    await this.connection.close();
  }
}
