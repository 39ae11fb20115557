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
 *
 * A statement the driver never settles (a connection lost in a way it misses) would hold its place for
 * good, and with every place held no write-only transaction would commit again. So a group that has not
 * settled within `settleWithinMs` gives its place up and its members fail as if the database had not
 * answered (retryable; an idempotency key makes a retry safe whatever became of the statement).
 */
import type { FactWriteSet } from '../../../core/facts/writeSet.ts';
import { DatabaseAnswerTimeout } from './answerDeadline.ts';

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
  /** How long a group may go unsettled before its members fail and its place is given up. */
  settleWithinMs: number;
}

export const defaultGroupCommitOptions: GroupCommitOptions = {
  maxInFlight: 2,
  maxMembers: 64,
  // Twice the connections' own answer deadline (database.ts), which should have ended it first.
  settleWithinMs: 30_000,
};

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
    private readonly options: GroupCommitOptions = defaultGroupCommitOptions,
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
      let timer: NodeJS.Timeout | undefined;
      const unsettled = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          const timeout = new DatabaseAnswerTimeout(this.options.settleWithinMs);
          for (const member of group) member.reject(timeout);
          resolve();
        }, this.options.settleWithinMs);
      });
      void Promise.race([this.sendGroup(group), unsettled]).finally(() => {
        clearTimeout(timer);
        this.inFlight -= 1;
        this.next();
      });
    }
  }

  /** Settles every member; never rejects itself. */
  private async sendGroup(group: Member[]): Promise<void> {
    try {
      await this.send(group.length === 1 ? group[0]!.writes : group.flatMap((m) => m.writes));
      for (const member of group) member.resolve();
    } catch (error) {
      if (group.length === 1 || !causedByRows(error)) {
        for (const member of group) member.reject(error);
        return;
      }
      await Promise.all(group.map((member) => this.sendAlone(member)));
    }
  }

  private async sendAlone(member: Member): Promise<void> {
    try {
      await this.send(member.writes);
      member.resolve();
    } catch (error) {
      member.reject(error);
    }
  }
}
