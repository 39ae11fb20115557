import { useState } from 'react';
import { api, usePolled } from '../api.ts';
import { duration } from '../format.tsx';
import { useCan } from '../session.ts';
import { useReasonedAction } from './useReasonedAction.ts';

interface Line {
  backlog: number;
  dead: number;
  oldestAgeMs: number | null;
}

/** The Temporal engine's JetStream bridge (null numbers: JetStream did not answer). */
interface BridgeLine {
  pending: number | null;
  unacked: number | null;
  oldestAgeMs: number | null;
  /** This replica's Temporal worker and bridge; null when this replica runs none. */
  connected: boolean | null;
}

interface HealthView {
  outbox: Line;
  realtime: Line;
  callbacks: Line;
  /** Null when Temporal is not set up. */
  temporalBridge: BridgeLine | null;
  staleSteps: number;
  queuedSteps: { count: number; oldestAgeMs: number | null };
}

function Card({
  title,
  value,
  detail,
  bad,
}: {
  title: string;
  value: string | number;
  detail: string;
  bad: boolean;
}) {
  return (
    <div className={`card ${bad ? 'bad' : ''}`} data-card={title}>
      <div className="muted">{title}</div>
      <div className="value">{value}</div>
      <div className="muted">{detail}</div>
    </div>
  );
}

const oldest = (ms: number | null) => (ms === null ? 'nothing waiting' : `oldest ${duration(ms)}`);

/** The pipeline's backlogs, read every 2 s: what is waiting, for how long, and what gave up. */
export function Health() {
  const { data: health, error, reload } = usePolled<HealthView>('/health', 2_000);
  if (error && !health) return <div className="panel error">Could not load the pipeline health: {error}</div>;
  if (!health) return <p className="loading">Loading…</p>;
  const slow = (ms: number | null) => ms !== null && ms > 60_000;
  const dead = tables.filter((t) => health[t.table].dead > 0);
  return (
    <>
      <section className="cards">
        <Card
          title="Domain outbox"
          value={health.outbox.backlog}
          detail={oldest(health.outbox.oldestAgeMs)}
          bad={slow(health.outbox.oldestAgeMs)}
        />
        <Card
          title="Realtime relay"
          value={health.realtime.backlog}
          detail={oldest(health.realtime.oldestAgeMs)}
          bad={slow(health.realtime.oldestAgeMs)}
        />
        <Card
          title="Callbacks waiting"
          value={health.callbacks.backlog}
          detail={oldest(health.callbacks.oldestAgeMs)}
          bad={slow(health.callbacks.oldestAgeMs)}
        />
        {health.temporalBridge ? <BridgeCard bridge={health.temporalBridge} slow={slow} /> : null}
        <Card
          title="Callbacks DEAD"
          value={health.callbacks.dead}
          detail="gave up; requeue below or redeliver from the task"
          bad={health.callbacks.dead > 0}
        />
        <Card
          title="Realtime DEAD"
          value={health.realtime.dead}
          detail="publications that gave up"
          bad={health.realtime.dead > 0}
        />
        <Card
          title="STALE steps"
          value={health.staleSteps}
          detail="running, heartbeats stopped"
          bad={health.staleSteps > 0}
        />
        <Card
          title="Steps waiting for a worker"
          value={health.queuedSteps.count}
          detail={oldest(health.queuedSteps.oldestAgeMs)}
          bad={slow(health.queuedSteps.oldestAgeMs)}
        />
      </section>
      {dead.length > 0 ? (
        <div className="panel">
          <h2>Dead letters</h2>
          {dead.map((t) => (
            <RequeueDead
              key={t.table}
              table={t.table}
              label={t.label}
              count={health[t.table].dead}
              onDone={reload}
            />
          ))}
        </div>
      ) : null}
    </>
  );
}

/** What the bridge has still to hand to Temporal, and whether this replica reaches Temporal. */
function BridgeCard({ bridge, slow }: { bridge: BridgeLine; slow: (ms: number | null) => boolean }) {
  const unread = bridge.pending === null || bridge.unacked === null;
  const waiting = unread ? '?' : bridge.pending! + bridge.unacked!;
  const reach =
    bridge.connected === null
      ? 'no Temporal worker in this replica'
      : bridge.connected
        ? 'Temporal connected'
        : 'Temporal not reachable: retrying';
  const detail = unread ? `JetStream did not answer; ${reach}` : `${oldest(bridge.oldestAgeMs)}; ${reach}`;
  return (
    <div data-bridge-connected={String(bridge.connected)} data-bridge-waiting={String(waiting)}>
      <Card
        title="Temporal bridge"
        value={waiting}
        detail={detail}
        bad={unread || bridge.connected === false || slow(bridge.oldestAgeMs)}
      />
    </div>
  );
}

const tables = [
  { table: 'outbox', label: 'Domain outbox' },
  { table: 'realtime', label: 'Realtime relay' },
  { table: 'callbacks', label: 'Callbacks' },
] as const;

/**
 * A table's DEAD rows; a platform-wide operator puts them back to be sent now (the oldest, up to the
 * server's limit), with a reason.
 */
function RequeueDead({
  table,
  label,
  count,
  onDone,
}: {
  table: string;
  label: string;
  count: number;
  onDone: () => void;
}) {
  const { actOnPlatform } = useCan();
  const { reason, setReason, busy, error, blank, run } = useReasonedAction();
  const [requeued, setRequeued] = useState<number | null>(null);
  const requeue = () =>
    run(async (given) => {
      const answer = await api<{ requeued: string[] }>(`/dead-letters/${table}/requeue`, {
        method: 'POST',
        body: { reason: given },
      });
      setRequeued(answer.requeued.length);
      onDone();
    });
  return (
    <div className="requeue" data-dead-table={table}>
      <strong>{label}</strong>: <span data-dead-count>{count}</span> DEAD{' '}
      {actOnPlatform ? (
        <>
          <input
            name="reason"
            placeholder="Reason (required)"
            value={reason}
            maxLength={2000}
            onChange={(event) => setReason(event.target.value)}
          />
          <button type="button" disabled={busy || blank} onClick={() => void requeue()}>
            Requeue
          </button>
        </>
      ) : null}
      {requeued !== null ? <span className="muted"> {requeued} requeued</span> : null}
      {error ? <span className="failure"> {error}</span> : null}
    </div>
  );
}
