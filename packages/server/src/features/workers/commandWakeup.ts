import type { Sql } from '../../adapters/outbound/postgres/database.ts';
import type { CommandHub } from '../../core/workers/commands.ts';

/** The PostgreSQL channel every process LISTENs on for workers that have new commands. */
export const commandChannel = 'tdp_worker_commands';

/** A NOTIFY payload must stay under 8,000 bytes: about 200 worker ids. */
const idsPerNotify = 200;

/**
 * Tells the other server replicas that workers have new commands, so the replica whose stream holds a
 * worker reads them at once instead of at its next poll. Only for workers with no stream in this process
 * (this process's own streams got the commands from the hub already), so a single replica sends none.
 * The workers of one turn of the event loop go out in one NOTIFY, after the commit.
 */
export class CommandWakeup {
  private pending = new Set<string>();

  constructor(
    private readonly hub: CommandHub,
    private readonly notify: (payload: string) => Promise<unknown>,
  ) {}

  committed(workerIds: string[]): void {
    const elsewhere = workerIds.filter((id) => !this.hub.holds(id));
    if (elsewhere.length === 0) return;
    if (this.pending.size === 0) setImmediate(() => this.send());
    for (const id of elsewhere) this.pending.add(id);
  }

  private send(): void {
    const ids = [...this.pending];
    this.pending = new Set();
    for (let i = 0; i < ids.length; i += idsPerNotify)
      this.notify(ids.slice(i, i + idsPerNotify).join(',')).catch(() => {});
  }
}

/** Wakes this process's streams of the workers another replica wrote commands for. */
export async function listenForCommands(sql: Sql, hub: CommandHub): Promise<() => Promise<void>> {
  const listener = await sql.listen(commandChannel, (payload) => {
    // Streams this process does not hold are simply not there to wake.
    hub.notify(payload.split(','));
  });
  return listener.unlisten;
}
