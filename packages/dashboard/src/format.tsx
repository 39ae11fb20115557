import { useEffect, useState } from 'react';

/** Re-renders every second while `active` (elapsed timers count locally, not by polling). */
export function useTick(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, [active]);
  return now;
}

export function duration(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))} ms`;
  const seconds = Math.floor(ms / 1_000);
  if (seconds < 60) return `${(ms / 1_000).toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Time since `startedAt`, stopping at `finishedAt`. */
export function elapsed(startedAt: string | null, finishedAt: string | null, now: number): string {
  if (!startedAt) return '—';
  const end = finishedAt ? new Date(finishedAt).getTime() : now;
  return duration(end - new Date(startedAt).getTime());
}

/** A step's run time: what the worker measured once it finished, else the time since it started. */
export function stepElapsedMs(
  step: { startedAt: string | null; finishedAt: string | null; durationMs?: number | null },
  now: number,
): number | null {
  if (step.finishedAt && step.durationMs != null) return step.durationMs;
  if (!step.startedAt) return null;
  return (step.finishedAt ? new Date(step.finishedAt).getTime() : now) - new Date(step.startedAt).getTime();
}

export function ago(at: string, now: number): string {
  return `${duration(now - new Date(at).getTime())} ago`;
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <span className="status" data-status={status}>
      {status}
    </span>
  );
}

export function Progress({ percent }: { percent: number | null | undefined }) {
  if (percent === null || percent === undefined) return <span className="muted">—</span>;
  return (
    <span className="progress">
      <progress max={100} value={percent} /> {percent}%
    </span>
  );
}
