/** A worker option (or its environment variable) that cannot work, said before anything starts. */
export class WorkerConfigError extends Error {
  override name = 'WorkerConfigError';
  /**
   * The option at fault (a key of StartWorkerOptions), so the environment form can name its variable
   * instead; a string here, as start.ts imports this file.
   */
  constructor(
    message: string,
    readonly option?: string,
  ) {
    super(message);
  }
}
