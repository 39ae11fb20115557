/**
 * The worker's local facts (docs/design/failure-windows.md): what it was told (the inbox, by command
 * id), what it is doing (attempts with lease version, state and checkpoint) and what it still has to say
 * (the outbox, one sequence per attempt). Each change is one SQLite transaction in WAL mode, so a process
 * killed at any point restarts knowing which results were produced and which were delivered.
 *
 * Errors from here are never "offline": the runtime treats them as fatal.
 */
import Database from 'better-sqlite3';
import { privateDatabaseFile } from './privateFiles.ts';

export type AttemptState = 'RUNNING' | 'FINISHED';

export interface LocalAttempt {
  attemptId: string;
  /** The server session the attempt was leased to (events go out under it, even after a restart). */
  workerId: string;
  commandId: string;
  leaseVersion: number;
  taskId: string;
  stepKey: string;
  attempt: number;
  capability: string;
  capabilityVersion: string;
  input: unknown;
  executionToken: string | null;
  heartbeatIntervalSeconds: number | null;
  state: AttemptState;
  checkpoint: unknown;
  /** The W3C trace context the attempt's spans continue (its command's, then its run's); null: none. */
  traceparent: string | null;
}

export interface OutboxEvent {
  eventId: string;
  attemptId: string;
  workerId: string;
  /** The body sent in `events:batch` (attemptId, leaseVersion, eventId, eventType, sourceSeq, …). */
  body: Record<string, unknown>;
  /** Its attempt's trace context (docs/observability.md), when read from the outbox. */
  traceparent?: string | null;
}

/** What an attempt says, before it has its event id and sequence. */
export type EventDraft = Record<string, unknown> & { eventType: string };

const schema = `
  CREATE TABLE IF NOT EXISTS inbox (
    command_id   TEXT PRIMARY KEY,
    worker_id    TEXT NOT NULL,
    type         TEXT NOT NULL,
    payload      TEXT NOT NULL,
    received_at  INTEGER NOT NULL,
    acked        INTEGER NOT NULL DEFAULT 0
  );
  CREATE TABLE IF NOT EXISTS attempt (
    attempt_id     TEXT PRIMARY KEY,
    worker_id      TEXT NOT NULL,
    command_id     TEXT NOT NULL,
    lease_version  INTEGER NOT NULL,
    task_id        TEXT NOT NULL,
    step_id        TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    capability     TEXT NOT NULL,
    capability_version TEXT NOT NULL,
    input          TEXT NOT NULL,
    execution_token TEXT,
    heartbeat_interval_seconds INTEGER,
    state          TEXT NOT NULL,
    checkpoint     TEXT,
    trace_parent   TEXT,
    next_seq       INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS outbox (
    event_id    TEXT PRIMARY KEY,
    attempt_id  TEXT NOT NULL,
    worker_id   TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    sent_at     INTEGER,
    UNIQUE (attempt_id, seq)
  );
  CREATE INDEX IF NOT EXISTS outbox_unsent ON outbox (created_at) WHERE sent_at IS NULL;
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  -- Acknowledged commands, answered events and finished attempts stay for the prune window (ten
  -- minutes: 90,000 commands at 150 a second). The reads made with every report batch go by these
  -- indexes, so their cost is what is open, not that window.
  CREATE INDEX IF NOT EXISTS inbox_unacked ON inbox (command_id) WHERE acked = 0;
  CREATE INDEX IF NOT EXISTS inbox_by_worker ON inbox (worker_id, command_id);
  CREATE INDEX IF NOT EXISTS attempt_running ON attempt (created_at) WHERE state = 'RUNNING';
`;

/** The commands not yet acknowledged, read with every report batch (by `inbox_unacked`). */
export const unackedCommands = 'SELECT command_id FROM inbox WHERE acked = 0 ORDER BY command_id';
/** The attempts this worker holds: running, or with events not yet sent (`attempt_running`, `outbox_unsent`). */
export const heldAttempts = `SELECT attempt_id FROM attempt WHERE state = 'RUNNING'
  UNION SELECT attempt_id FROM outbox WHERE sent_at IS NULL`;

interface AttemptRow {
  attempt_id: string;
  worker_id: string;
  command_id: string;
  lease_version: number;
  task_id: string;
  step_id: string;
  attempt: number;
  capability: string;
  capability_version: string;
  input: string;
  execution_token: string | null;
  heartbeat_interval_seconds: number | null;
  state: AttemptState;
  checkpoint: string | null;
  trace_parent: string | null;
}

const toAttempt = (r: AttemptRow): LocalAttempt => ({
  attemptId: r.attempt_id,
  workerId: r.worker_id,
  commandId: r.command_id,
  leaseVersion: r.lease_version,
  taskId: r.task_id,
  stepKey: r.step_id,
  attempt: r.attempt,
  capability: r.capability,
  capabilityVersion: r.capability_version,
  input: JSON.parse(r.input),
  executionToken: r.execution_token,
  heartbeatIntervalSeconds: r.heartbeat_interval_seconds,
  state: r.state,
  checkpoint: r.checkpoint === null ? null : JSON.parse(r.checkpoint),
  traceparent: r.trace_parent,
});

/** How long the store's writes wait for others to share their commit (`LocalStore.write`). */
const commitAfterMs = 5;

export class LocalStore {
  private readonly db: Database.Database;
  /** Prepared once: preparing a statement at each call was a visible share of a busy worker's time. */
  private readonly statements = new Map<string, Database.Statement>();
  private commitTimer: NodeJS.Timeout | null = null;

  /**
   * Runs `work` in the store's open transaction (opening one if none is), so that the writes of the
   * next few milliseconds share one commit: one fsync for all, where each received command, started
   * attempt and recorded event used to pay its own, on the event loop. What is read to be sent
   * (`unsent`, `unacked`, `heldAttemptIds`, `lastCommandId`) is committed first, so the server only
   * ever learns what is on disk. A crash loses at most writes nothing outside has seen: as if it had
   * come a few milliseconds earlier, which the server's leases and re-sent commands already cover.
   */
  private write<T>(work: () => T): T {
    if (!this.db.inTransaction) {
      this.db.exec('BEGIN');
      this.commitTimer = setTimeout(() => {
        this.commitTimer = null;
        try {
          this.flush();
        } catch {
          // Left open: the next read made to send something commits it, or fails in its own loop.
        }
      }, commitAfterMs);
    }
    return this.db.transaction(work)();
  }

  /** Commits the writes not yet committed (before anything read from them leaves the process). */
  flush(): void {
    if (this.commitTimer) {
      clearTimeout(this.commitTimer);
      this.commitTimer = null;
    }
    if (this.db.inTransaction) this.db.exec('COMMIT');
  }

  private statement(text: string): Database.Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  constructor(
    path: string,
    private readonly newId: () => string,
    private readonly now: () => number = Date.now,
  ) {
    // Execution tokens and every tenant's inputs: the file (and its -wal, -shm) is this user's alone.
    privateDatabaseFile(path);
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    // FULL: a result the worker wrote survives a power cut, not only a killed process.
    this.db.pragma('synchronous = FULL');
    this.db.exec(schema);
    // Files written before traces kept no trace context: the column is added in place.
    const columns = this.db.prepare('PRAGMA table_info(attempt)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'trace_parent'))
      this.db.exec('ALTER TABLE attempt ADD COLUMN trace_parent TEXT');
  }

  close(): void {
    this.flush();
    this.db.close();
  }

  getMeta(key: string): string | null {
    const row = this.statement('SELECT value FROM meta WHERE key = ?').get(key) as
      | { value: string }
      | undefined;
    return row?.value ?? null;
  }

  setMeta(key: string, value: string | null): void {
    // Kept at once: what the session knows of itself (its id, draining) must not wait for a send.
    this.flush();
    if (value === null) this.statement('DELETE FROM meta WHERE key = ?').run(key);
    else
      this.statement(
        'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      ).run(key, value);
  }

  /**
   * Records a received command once. A START_ATTEMPT also records its attempt, in the same transaction.
   * Returns false for a command already in the inbox (the server sent it again): it is acknowledged
   * again, since the server sends again only what it has no acknowledgement of.
   */
  receive(
    workerId: string,
    command: { commandId: string; type: string; payload: Record<string, unknown> },
  ): boolean {
    return this.write(() => {
      const inserted = this.statement(
        'INSERT INTO inbox (command_id, worker_id, type, payload, received_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
      ).run(command.commandId, workerId, command.type, JSON.stringify(command.payload), this.now());
      if (inserted.changes === 0) {
        this.statement('UPDATE inbox SET acked = 0 WHERE command_id = ?').run(command.commandId);
        return false;
      }
      if (command.type === 'START_ATTEMPT') {
        const p = command.payload as {
          attemptId: string;
          leaseVersion: number;
          taskId: string;
          stepKey?: string;
          /** @deprecated use stepKey (still read from servers that send no stepKey) */
          stepId: string;
          attempt: number;
          capability: string;
          capabilityVersion: string;
          input: unknown;
          executionToken?: string;
          heartbeatIntervalSeconds?: number | null;
          traceparent?: string;
        };
        this.statement(
          `INSERT INTO attempt (attempt_id, worker_id, command_id, lease_version, task_id, step_id, attempt, capability,
                                  capability_version, input, execution_token, heartbeat_interval_seconds, trace_parent, state,
                                  created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?)
             ON CONFLICT (attempt_id) DO NOTHING`,
        ).run(
          p.attemptId,
          workerId,
          command.commandId,
          p.leaseVersion,
          p.taskId,
          p.stepKey ?? p.stepId,
          p.attempt,
          p.capability,
          p.capabilityVersion,
          JSON.stringify(p.input ?? null),
          p.executionToken ?? null,
          p.heartbeatIntervalSeconds ?? null,
          p.traceparent ?? null,
          this.now(),
          this.now(),
        );
      }
      return true;
    });
  }

  /** Commands received but not yet acknowledged to the server. */
  unacked(): string[] {
    this.flush();
    return (
      this.statement(unackedCommands).all() as {
        command_id: string;
      }[]
    ).map((r) => r.command_id);
  }

  markAcked(commandIds: readonly string[]): void {
    const mark = this.statement('UPDATE inbox SET acked = 1 WHERE command_id = ?');
    this.write(() => {
      for (const id of commandIds) mark.run(id);
    });
  }

  /** The newest command id received by a session: its `Last-Event-ID` after a reconnect. */
  lastCommandId(workerId: string): string | null {
    this.flush();
    const row = this.statement('SELECT max(command_id) AS id FROM inbox WHERE worker_id = ?').get(
      workerId,
    ) as { id: string | null };
    return row.id;
  }

  getAttempt(attemptId: string): LocalAttempt | null {
    const row = this.statement('SELECT * FROM attempt WHERE attempt_id = ?').get(attemptId) as
      | AttemptRow
      | undefined;
    return row ? toAttempt(row) : null;
  }

  /**
   * The attempts this worker holds, for its session heartbeat: those running, and those whose events
   * are not all acknowledged yet.
   */
  heldAttemptIds(): string[] {
    this.flush();
    return (this.statement(heldAttempts).all() as { attempt_id: string }[]).map((row) => row.attempt_id);
  }

  /** Attempts not finished: after a restart, each is resumed or handed back. */
  runningAttempts(): LocalAttempt[] {
    return (
      this.statement(
        "SELECT * FROM attempt WHERE state = 'RUNNING' ORDER BY created_at",
      ).all() as AttemptRow[]
    ).map(toAttempt);
  }

  /** The attempt's run span: its reports continue from it, also after a restart. */
  saveTraceparent(attemptId: string, traceparent: string): void {
    this.write(() =>
      this.statement('UPDATE attempt SET trace_parent = ? WHERE attempt_id = ?').run(traceparent, attemptId),
    );
  }

  saveCheckpoint(attemptId: string, data: unknown): void {
    this.write(() =>
      this.statement('UPDATE attempt SET checkpoint = ?, updated_at = ? WHERE attempt_id = ?').run(
        JSON.stringify(data),
        this.now(),
        attemptId,
      ),
    );
  }

  /**
   * Writes an event of the attempt to the outbox with the attempt's next sequence number; with `final`,
   * the attempt is finished in the same transaction (its result and its end are one local fact).
   * Nothing is written for an attempt already finished.
   */
  record(attemptId: string, draft: EventDraft, final = false): OutboxEvent | null {
    return this.write(() => {
      const row = this.statement(
        'SELECT worker_id, lease_version, next_seq, state FROM attempt WHERE attempt_id = ?',
      ).get(attemptId) as
        | { worker_id: string; lease_version: number; next_seq: number; state: AttemptState }
        | undefined;
      if (!row || row.state === 'FINISHED') return null;
      const eventId = this.newId();
      const body = { ...draft, attemptId, leaseVersion: row.lease_version, eventId, sourceSeq: row.next_seq };
      this.statement(
        'INSERT INTO outbox (event_id, attempt_id, worker_id, seq, body, created_at) VALUES (?, ?, ?, ?, ?, ?)',
      ).run(eventId, attemptId, row.worker_id, row.next_seq, JSON.stringify(body), this.now());
      this.statement(
        `UPDATE attempt SET next_seq = next_seq + 1, updated_at = ?${final ? ", state = 'FINISHED'" : ''} WHERE attempt_id = ?`,
      ).run(this.now(), attemptId);
      return { eventId, attemptId, workerId: row.worker_id, body };
    });
  }

  /** Undelivered events, oldest first (but those of the sessions named: set aside for now). */
  unsent(limit: number, exceptSessions: ReadonlySet<string> = new Set()): OutboxEvent[] {
    this.flush();
    return (
      this.statement(
        `SELECT o.event_id, o.attempt_id, o.worker_id, o.body, a.trace_parent
           FROM outbox o LEFT JOIN attempt a ON a.attempt_id = o.attempt_id
           WHERE o.sent_at IS NULL AND o.worker_id NOT IN (SELECT value FROM json_each(?))
           ORDER BY o.created_at, o.seq LIMIT ?`,
      ).all(JSON.stringify([...exceptSessions]), limit) as {
        event_id: string;
        attempt_id: string;
        worker_id: string;
        body: string;
        trace_parent: string | null;
      }[]
    ).map((r) => ({
      eventId: r.event_id,
      attemptId: r.attempt_id,
      workerId: r.worker_id,
      body: JSON.parse(r.body),
      traceparent: r.trace_parent,
    }));
  }

  markSent(eventIds: string[]): void {
    const mark = this.statement('UPDATE outbox SET sent_at = ? WHERE event_id = ?');
    const at = this.now();
    this.write(() => {
      for (const id of eventIds) mark.run(at, id);
    });
  }

  /**
   * Forgets what the server has acknowledged, `keepMs` after it did: events it answered, finished
   * attempts with nothing left to send, and acknowledged commands (the newest command of each session
   * stays: it is the `Last-Event-ID` of a reconnect). Returns the rows removed per table.
   */
  prune(keepMs: number): { outbox: number; attempt: number; inbox: number } {
    const before = this.now() - keepMs;
    return this.write(() => ({
      outbox: this.statement('DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ?').run(before)
        .changes,
      attempt: this.statement(
        `DELETE FROM attempt WHERE state = 'FINISHED' AND updated_at < ?
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.attempt_id = attempt.attempt_id AND o.sent_at IS NULL)`,
      ).run(before).changes,
      inbox: this.statement(
        `DELETE FROM inbox WHERE acked = 1 AND received_at < ?
           AND command_id < (SELECT max(command_id) FROM inbox newest WHERE newest.worker_id = inbox.worker_id)`,
      ).run(before).changes,
    }));
  }

  unsentCount(): number {
    return (this.statement('SELECT count(*) AS n FROM outbox WHERE sent_at IS NULL').get() as { n: number })
      .n;
  }
}
