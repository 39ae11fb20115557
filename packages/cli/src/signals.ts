/**
 * Resolves after the first SIGINT or SIGTERM once `shutdown` has finished. A second signal while
 * shutting down exits at once, for the impatient. A shutdown still running after `deadlineMs` (something
 * it waits for will never settle, e.g. a query on a connection that stopped answering) is abandoned: the
 * process exits with 1, so a supervisor can start it again instead of waiting on it forever. (A worker's
 * drain has its own grace period and passes none.)
 */
export function onShutdownSignal(shutdown: () => Promise<void>, deadlineMs?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    const handler = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`\n${signal} again: exiting without waiting\n`);
        process.exit(130);
      }
      stopping = true;
      process.stderr.write(`\n${signal}: shutting down (finishing in-flight work)…\n`);
      const deadline =
        deadlineMs === undefined
          ? undefined
          : setTimeout(() => {
              process.stderr.write(`shutdown did not finish within ${deadlineMs} ms: exiting without it\n`);
              process.exit(1);
            }, deadlineMs);
      shutdown().then(
        () => {
          clearTimeout(deadline);
          resolve();
        },
        (error: unknown) => {
          clearTimeout(deadline);
          reject(error);
        },
      );
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}
