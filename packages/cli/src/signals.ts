/**
 * Resolves after the first SIGINT or SIGTERM once `shutdown` has finished. A second signal while
 * shutting down exits at once, for the impatient.
 */
export function onShutdownSignal(shutdown: () => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    const handler = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`\n${signal} again: exiting without waiting\n`);
        process.exit(130);
      }
      stopping = true;
      process.stderr.write(`\n${signal}: shutting down (finishing in-flight work)…\n`);
      shutdown().then(resolve, reject);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}
