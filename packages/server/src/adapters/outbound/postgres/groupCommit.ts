/**
 * Group commit for write-only transactions (a create, a batch of acknowledgements): each is one
 * statement with no reads, atomic on its own. Those that arrive while earlier ones are on their way to
 * PostgreSQL go out together as one statement: one round trip, one commit and one WAL flush for all of
 * them, where each used to pay its own. Nothing waits for a window: with no statement in flight, a
 * transaction goes out at once, so a quiet server answers as fast as before; under load the groups
 * form by themselves, as large as the load.
 *
 * The guarantees stay each transaction's own. A group's statement commits all of its members or none.
 * When it fails because of one member's rows (an idempotency key taken by a concurrent retry, a value
 * the database refuses), each member is sent again alone, so the others commit and only the culprit
 * fails, with the error it would have had alone. Any other failure (a lost connection, a deadlock) is
 * every member's, as it would have been for each alone, and each caller's own retry rules apply.
 */
import type { FactWriteSet } from '../../../core/facts/writeSet.ts';

interface Member {
  writes: FactWriteSet[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

export interface GroupCommitOptions {
  /** Statements in flight at once; more transactions than this wait and go out as one. */
  maxInFlight: number;
  /** Transactions in one statement at most (its parameters grow with them). */
  maxMembers: number;
}

/** SQLSTATE classes caused by a statement's own rows: integrity (23) and data (22) violations. */
const causedByRows = (error: unknown) => {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && (code.startsWith('23') || code.startsWith('22'));
};

export class GroupCommit {
  private readonly waiting: Member[] = [];
  private inFlight = 0;

  /** `send` applies write sets as one statement (`factStatements` → `runAll`). */
  constructor(
    private readonly send: (writes: FactWriteSet[]) => Promise<unknown>,
    private readonly options: GroupCommitOptions = { maxInFlight: 2, maxMembers: 64 },
  ) {}

  /** Resolves once `writes` are committed, rejects with the error they would have had alone. */
  commit(writes: FactWriteSet[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ writes, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.options.maxMembers);
      this.inFlight += 1;
      void this.sendGroup(group).finally(() => {
        this.inFlight -= 1;
        this.next();
      });
    }
  }

  private async sendGroup(group: Member[]): Promise<void> {
    try {
      await this.send(group.length === 1 ? group[0]!.writes : group.flatMap((m) => m.writes));
      for (const member of group) member.resolve();
    } catch (error) {
      if (group.length === 1 || !causedByRows(error)) {
        for (const member of group) member.reject(error);
        return;
      }
      await Promise.all(group.map((member) => this.send(member.writes).then(member.resolve, member.reject)));
    }
  }
}
