/**
 * The operator's live feed: one WebSocket (the `centrifuge` SDK) to the in-process gateway, subscribed by
 * its token to every task's summary. The connection state is what the header shows: LIVE, RECOVERING
 * (reconnecting; missed messages will be recovered) or STALE (disconnected too long, or history lost:
 * the views reload).
 */

import type { ConnectionState as ClientConnectionState, TaskSummary } from '@tdp/client';
import { Centrifuge } from 'centrifuge';
import { api } from './api.ts';

/** The client's states, and CONNECTING before the first connection. */
export type ConnectionState = 'CONNECTING' | ClientConnectionState;

/** The operators' channel carries the task summary users get, with where the task belongs. */
export interface TaskSummaryMessage extends TaskSummary {
  tenantId: string;
  applicationId: string;
  workflowName: string | null;
}

type Listener<T> = (value: T) => void;

export class LiveFeed {
  private client: Centrifuge | null = null;
  private state: ConnectionState = 'CONNECTING';
  private staleTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly stateListeners = new Set<Listener<ConnectionState>>();
  private readonly messageListeners = new Set<Listener<TaskSummaryMessage>>();
  /** Told when messages may have been missed for good: reload what you show. */
  private readonly resyncListeners = new Set<Listener<void>>();

  async start(): Promise<void> {
    const token = () => api<{ token: string; url: string }>('/realtime-token');
    const first = await token();
    const client = new Centrifuge(first.url, {
      token: first.token,
      getToken: async () => (await token()).token,
    });
    this.client = client;
    client.on('connecting', () => {
      if (this.state === 'LIVE') this.set('RECOVERING');
      // A reconnection that takes this long shows as STALE: what is on screen may be old.
      this.staleTimer ??= setTimeout(() => this.set('STALE'), 10_000);
    });
    client.on('connected', () => {
      if (this.staleTimer) clearTimeout(this.staleTimer);
      this.staleTimer = null;
      const wasStale = this.state === 'STALE';
      this.set('LIVE');
      if (wasStale) for (const listener of this.resyncListeners) listener();
    });
    client.on('subscribed', (context) => {
      if (context.wasRecovering && !context.recovered)
        for (const listener of this.resyncListeners) listener();
    });
    client.on('publication', (context) => {
      const message = context.data as TaskSummaryMessage;
      if (message?.kind === 'task.summary') for (const listener of this.messageListeners) listener(message);
    });
    client.connect();
  }

  stop(): void {
    this.client?.disconnect();
  }

  private set(state: ConnectionState) {
    this.state = state;
    for (const listener of this.stateListeners) listener(state);
  }

  onState(listener: Listener<ConnectionState>): () => void {
    this.stateListeners.add(listener);
    listener(this.state);
    return () => this.stateListeners.delete(listener);
  }

  onMessage(listener: Listener<TaskSummaryMessage>): () => void {
    this.messageListeners.add(listener);
    return () => this.messageListeners.delete(listener);
  }

  onResync(listener: Listener<void>): () => void {
    this.resyncListeners.add(listener);
    return () => this.resyncListeners.delete(listener);
  }
}
