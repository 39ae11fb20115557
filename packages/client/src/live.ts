/**
 * Binds a `TaskStore` to the realtime gateway through the `centrifuge` SDK (docs/realtime.md):
 *
 * - The person's task channel is a server-side subscription of the connection token: its publications
 *   go into the store. The first subscription, and any later one that could not recover what was missed,
 *   loads a snapshot of the person's tasks (messages meanwhile are held and replayed on top).
 * - `follow(taskId)` subscribes to one task's detail channel with a token from the application's
 *   backend; a detail that could not be recovered is reloaded the same way.
 * - The connection state follows the SDK: connecting → RECOVERING, disconnected → STALE, and LIVE only
 *   once the person's channel has caught up (recovered, or its snapshot loaded) — so the connection
 *   token must carry that channel, as `POST /v1/realtime/connection-token` makes it.
 * - The tenant's and the system's broadcast channels (also server-side) are not tasks: their notices go
 *   to `onBroadcast`, and they neither load snapshots nor hold the state back from LIVE.
 */
import type { Centrifuge, Subscription } from 'centrifuge';
import type {
  SnapshotItem,
  TaskDetail,
  TaskListItem,
  TaskMessage,
  TaskStore,
  TaskSummary,
} from './taskStore.ts';

export interface LiveTasksOptions {
  centrifuge: Centrifuge;
  store: TaskStore;
  /** The person's tasks now: the `items` of `GET /v1/me/tasks` (e.g. `TdpUserClient.myTasks()`), as they come. */
  loadTasks(): Promise<(TaskListItem | TaskSummary)[]>;
  /**
   * A subscription token for a task's detail channel (`POST /v1/realtime/subscription-token`). Pass
   * `clientId` (this connection's, once connected) on as `clientId`: with Centrifugo, TDP needs it to
   * keep a connection to 20 task details.
   */
  detailToken?(taskId: string, clientId?: string): Promise<{ token: string; channel: string }>;
  /** Details of these tasks now (`POST /v1/tasks/status:batchGet`), after a gap. */
  loadDetails?(taskIds: string[]): Promise<TaskDetail[]>;
  /** A snapshot load failed (it is tried again after a pause; the store keeps what it had meanwhile). */
  onError?(error: unknown): void;
  /** A notice to the person's tenant or to everyone (`task_tenant:…`, `task_system:public`). */
  onBroadcast?(broadcast: Broadcast): void;
}

/** A notice on a broadcast channel: never about a task. */
export type Broadcast =
  | {
      kind: 'broadcast';
      scope: 'TENANT';
      id: string;
      title: string;
      message: string;
      severity: 'INFO' | 'WARNING' | 'CRITICAL';
      link: string | null;
      sentAt: string;
    }
  | {
      kind: 'broadcast';
      scope: 'SYSTEM';
      id: string;
      message: string;
      severity: 'INFO' | 'WARNING' | 'CRITICAL';
      sentAt: string;
    };

const isBroadcastChannel = (channel: string | undefined) =>
  channel !== undefined && (channel.startsWith('task_tenant:') || channel.startsWith('task_system:'));

/**
 * The pause before loading a snapshot again: 0.5 s doubling to 10 s, at least what a 429 or 503 asked
 * for (`retryAfterSeconds`, as `TdpError` carries it), each drawn at random between half and all of it.
 */
export function snapshotRetryDelay(
  attempt: number,
  error: unknown,
  random: () => number = Math.random,
): number {
  const asked = (error as { retryAfterSeconds?: unknown } | null)?.retryAfterSeconds;
  const floor = typeof asked === 'number' && asked > 0 ? asked * 1000 : 0;
  const delay = Math.max(Math.min(500 * 2 ** attempt, 10_000), floor);
  return Math.round(delay * (0.5 + random() / 2));
}

export interface LiveTasks {
  /** Follows one task's detail channel; returns the function that stops following it. */
  follow(taskId: string): Promise<() => void>;
  close(): void;
}

export function bindTaskStore(options: LiveTasksOptions): LiveTasks {
  const { centrifuge, store } = options;
  const followed = new Map<string, Subscription>();
  // The connection's id changes with every reconnection; a token asked for names the current one.
  let clientId: string | undefined;
  let loading = 0;
  const settle = () => {
    if (loading === 0 && centrifuge.state === 'connected') store.setConnection('LIVE');
  };

  let closed = false;
  // A failed load is tried again, after a pause that grows and is spread at random (a node that died
  // sends all its clients here at once: their loads must not all come back in the same instant). The
  // store stays RECOVERING meanwhile, never LIVE on a list it could not load. Given up when the error
  // is not retryable, when the connection goes (its next subscription loads again) or at close.
  const reload = async (load: () => Promise<SnapshotItem[]>) => {
    loading += 1;
    store.setConnection('RECOVERING');
    store.beginSnapshot();
    let items: SnapshotItem[] = [];
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          items = await load();
          break;
        } catch (error) {
          options.onError?.(error);
          // Refused for good (an expired or revoked token): the page must act, not this loop.
          if ((error as { retryable?: unknown } | null)?.retryable === false) break;
          if (closed || centrifuge.state !== 'connected') break;
          await new Promise((resolve) => setTimeout(resolve, snapshotRetryDelay(attempt, error)));
          if (closed || centrifuge.state !== 'connected') break;
        }
      }
    } finally {
      store.endSnapshot(items);
      loading -= 1;
      settle();
    }
  };

  const onPublication = (ctx: { data: unknown }) => {
    store.receive(ctx.data as TaskMessage);
  };
  const onServerPublication = (ctx: { channel: string; data: unknown }) => {
    if (isBroadcastChannel(ctx.channel)) options.onBroadcast?.(ctx.data as Broadcast);
    else onPublication(ctx);
  };
  // Server-side subscriptions (the person's channel): caught up, or not (then a snapshot).
  // Not recovered: one snapshot of the list and, in one batch, of the details in view.
  const onSubscribed = (ctx: { channel: string; wasRecovering: boolean; recovered: boolean }) => {
    if (isBroadcastChannel(ctx.channel)) return;
    if (ctx.wasRecovering && ctx.recovered) settle();
    else
      void reload(async () => {
        const inView = [...followed.keys()];
        const [tasks, details] = await Promise.all([
          options.loadTasks(),
          inView.length > 0 && options.loadDetails ? options.loadDetails(inView) : [],
        ]);
        return [...tasks, ...details];
      });
  };
  const onConnected = (ctx: { client: string }) => {
    clientId = ctx.client;
  };
  const onConnecting = () => store.setConnection('RECOVERING');
  const onDisconnected = () => store.setConnection('STALE');
  centrifuge.on('publication', onServerPublication);
  centrifuge.on('subscribed', onSubscribed);
  centrifuge.on('connected', onConnected);
  centrifuge.on('connecting', onConnecting);
  centrifuge.on('disconnected', onDisconnected);

  return {
    async follow(taskId) {
      if (!options.detailToken) throw new Error('following a task needs detailToken');
      const existing = followed.get(taskId);
      if (existing) return () => {};
      const issued = await options.detailToken(taskId, clientId);
      const subscription = centrifuge.newSubscription(issued.channel, {
        token: issued.token,
        getToken: async () => (await options.detailToken!(taskId, clientId)).token,
      });
      subscription.on('publication', onPublication);
      subscription.on('subscribed', (ctx) => {
        if ((!ctx.wasRecovering || !ctx.recovered) && options.loadDetails)
          void reload(() => options.loadDetails!([taskId]));
      });
      followed.set(taskId, subscription);
      subscription.subscribe();
      return () => {
        subscription.unsubscribe();
        centrifuge.removeSubscription(subscription);
        followed.delete(taskId);
      };
    },
    close() {
      closed = true;
      for (const subscription of followed.values()) {
        subscription.unsubscribe();
        centrifuge.removeSubscription(subscription);
      }
      followed.clear();
      centrifuge.removeListener('publication', onServerPublication);
      centrifuge.removeListener('subscribed', onSubscribed);
      centrifuge.removeListener('connected', onConnected);
      centrifuge.removeListener('connecting', onConnecting);
      centrifuge.removeListener('disconnected', onDisconnected);
    },
  };
}
