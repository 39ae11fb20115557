import type { CandidateSource } from './ports.ts';
import type { WorkerCandidate } from './selector.ts';

/**
 * The workers as read a moment ago, so that a request creating a task can place its first steps in its
 * own transaction without reading (the scheduler loop, a transaction and a wake-up later, is the path
 * when there is no fresh snapshot). A worker change empties it. Its counts only say which workers may
 * be free: the placing transaction locks those and counts their attempts again (`lockCandidates`), so
 * capacity is a hard limit; an attempt placed on a worker that ended meanwhile is failed over by the
 * lease loop.
 */
export class CandidateSnapshot implements CandidateSource {
  private candidates: WorkerCandidate[] | null = null;
  private readAt = 0;
  private reading: Promise<void> | null = null;
  /** Bumped by `invalidate`, so a read that started before a change is not kept. */
  private generation = 0;

  constructor(
    private readonly read: () => Promise<WorkerCandidate[]>,
    private readonly maxAgeMs = 1_000,
    private readonly monotonicMs: () => number = () => performance.now(),
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  /** The scheduler's last round was full: steps are waiting in its queue, by priority then age. */
  private backlog = false;

  /**
   * Fresh candidates without waiting, or null; a snapshot past half its age is renewed behind. Null
   * too while the scheduler has a backlog, so that a new step does not overtake older ones.
   */
  current(): WorkerCandidate[] | null {
    if (this.backlog) return null;
    const age = this.monotonicMs() - this.readAt;
    if (this.candidates === null || age > this.maxAgeMs / 2) this.refresh();
    return this.candidates !== null && age <= this.maxAgeMs ? this.candidates : null;
  }

  schedulerRound(full: boolean): void {
    this.backlog = full;
  }

  /** A worker registered, changed or ended: placements wait for a new read, which starts now. */
  invalidate(): void {
    this.generation += 1;
    this.candidates = null;
    this.refresh();
  }

  private refresh(): void {
    if (this.reading) return;
    const generation = this.generation;
    const startedAt = this.monotonicMs();
    this.reading = this.read()
      .then(
        (candidates) => {
          if (generation !== this.generation) return;
          this.candidates = candidates;
          this.readAt = startedAt;
        },
        (error: unknown) => this.onError(error),
      )
      .finally(() => {
        this.reading = null;
        // Invalidated while reading: what was read may predate the change, so read again.
        if (generation !== this.generation) this.refresh();
      });
  }
}
