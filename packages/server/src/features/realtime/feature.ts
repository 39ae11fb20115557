/**
 * Realtime: every state change live in the browser, to exactly the people allowed to see it. The
 * in-process gateway (or Centrifugo), its tokens, the task stream, broadcasts, commit→visible telemetry;
 * after a commit the hand-off publishes the transaction's realtime rows at once, and the relay loop
 * publishes what it could not. With Centrifugo, each replica's follower feeds its own task streams from
 * what every replica committed.
 */

import type { Gateway } from '@tdp/gateway';
import { registerBroadcastRoutes } from '../../adapters/inbound/http/broadcastRoutes.ts';
import { registerRealtimeRoutes } from '../../adapters/inbound/http/realtimeRoutes.ts';
import { registerTaskStreamRoutes } from '../../adapters/inbound/http/taskStreamRoutes.ts';
import { registerTelemetryRoutes } from '../../adapters/inbound/http/telemetryRoutes.ts';
import { PostgresBroadcastStore } from '../../adapters/outbound/postgres/broadcastStore.ts';
import { stopListening } from '../../adapters/outbound/postgres/database.ts';
import { PostgresDetailLeases } from '../../adapters/outbound/postgres/detailLeaseStore.ts';
import { PostgresRealtimeOutbox } from '../../adapters/outbound/postgres/realtimeOutbox.ts';
import { PostgresStreamSessions } from '../../adapters/outbound/postgres/streamSessionStore.ts';
import { PostgresTraceContexts } from '../../adapters/outbound/postgres/traceContexts.ts';
import { CentrifugoPresence } from '../../adapters/outbound/realtime/centrifugoPresence.ts';
import { CentrifugoUnsubscribe } from '../../adapters/outbound/realtime/centrifugoUnsubscribe.ts';
import { realtimeClaimPolicy } from '../../core/outbox/policy.ts';
import { RealtimeHandoff } from '../../core/realtime/handoff.ts';
import { type RelayDeps, relayRealtime } from '../../core/realtime/relay.ts';
import type { Viewer } from '../../core/status/ports.ts';
import { defineFeature } from '../../host/feature.ts';
import {
  FollowerWakeup,
  projectionFollowLoop,
  publishesElsewhere,
  realtimeCommittedChannel,
  realtimeHandoffMode,
  realtimePublisher,
} from './delivery.ts';
import { createGateway, realtimeTokenKey, realtimeTokenSecretFrom } from './gateway.ts';
import { realtimeRevocations } from './revocations.ts';
import { realtimeSettings } from './settings.ts';

export interface Realtime {
  gateway: Gateway;
  /** The key realtime tokens are signed with. */
  key: Uint8Array;
  rows: PostgresRealtimeOutbox;
  /** The WebSocket URL handed out with connection tokens (null: this server's). */
  wsUrl: string | null;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    realtime: Realtime;
  }
}

export const realtimeFeature = defineFeature({
  name: 'realtime',
  settings: realtimeSettings,
  async start(host, settings) {
    const { clock, logger, metrics, sql } = host;
    // Its tokens are signed with the shared secret when one is set (Centrifugo checks them with it too),
    // else with a key derived from the keyring.
    const key = realtimeTokenKey(
      host.settings.secretKeyring,
      realtimeTokenSecretFrom(settings.realtimeTokenSecret),
    );
    const identity = host.need('identity');
    const gateway = createGateway(
      { ...settings, jsonMaxDepth: host.settings.jsonMaxDepth },
      key,
      () => clock.now().getTime(),
      {
        // Every token TDP mints says when it dies, and one an application's key minted names the key
        // (`akid`): it works only while the key does (the check is the authenticator's cached row).
        requireExpiry: true,
        acceptToken: async (claims) =>
          claims.akid === undefined ||
          (typeof claims.akid === 'string' && (await identity.authenticator.keyActive(claims.akid))),
      },
      {
        coalesced: () => metrics.realtimeSlowCoalesced.inc(),
        slowDisconnect: () => metrics.realtimeSlowDisconnects.inc(),
      },
    );
    await gateway.ready;
    let closing: Promise<void> | null = null;
    const closeGateway = () => {
      closing ??= gateway.close();
      return closing;
    };
    host.handleRawHttp((request, response) => gateway.handleHttp(request, response));
    const rows = new PostgresRealtimeOutbox(sql, realtimeClaimPolicy);
    host.provide('realtime', { gateway, key, rows, wsUrl: settings.realtimeWsUrl });
    const publisher = realtimePublisher(settings, gateway);
    const observer = {
      published: (committedAt: Date, now: Date) =>
        metrics.realtimeLatency.observe(Math.max(0, now.getTime() - committedAt.getTime()) / 1000),
      handedOff: (takenAt: Date, now: Date) =>
        metrics.realtimeHandoff.observe(Math.max(0, now.getTime() - takenAt.getTime()) / 1000),
      coalesced: (count: number) => metrics.realtimeCoalesced.inc(count),
      dead: (row: { id: string; channel: string }, error: string) => {
        metrics.realtimeDead.inc();
        logger.warn({ realtimeId: row.id, channel: row.channel, error }, 'realtime message went DEAD');
      },
    };
    // With tracing on, a publication finds its task's trace in its execution snapshot.
    const traces = host.settings.tracing
      ? { traces: { tracing: host.tracing, contexts: new PostgresTraceContexts(sql) } }
      : {};
    const relayDeps: RelayDeps = { rows, publisher, observer, ...traces, clock };
    const relay = host.settings.runLoops
      ? host.loop({
          name: 'realtime',
          ...settings.realtimeLoop,
          // Publishes committed realtime rows in commit order: what the hand-off could not.
          round: async () => ({
            full:
              (await relayRealtime(relayDeps, settings.realtimeLoop.batchSize)) ===
              settings.realtimeLoop.batchSize,
          }),
        })
      : null;
    // Where the loops run, a transaction's realtime rows are published right after its commit.
    const handoffMode = relay ? realtimeHandoffMode(settings) : undefined;
    const handoff = handoffMode
      ? new RealtimeHandoff({
          publisher,
          ...(handoffMode.kind === 'durable' ? { rows } : {}),
          clock,
          observer,
          tracing: host.tracing,
          onError: (error) =>
            logger.warn({ err: error }, 'realtime hand-off failed; the relay loop will publish'),
        })
      : null;
    // With Centrifugo, this replica's task streams are fed from what every replica committed.
    const follower = await projectionFollowLoop(settings, { sql, gateway, clock, logger, loop: host.loop });
    const followerWakeup = follower
      ? new FollowerWakeup(
          follower,
          () => sql.notify(realtimeCommittedChannel, ''),
          host.settings.notifyIntervalMs,
        )
      : null;
    const followerListener = follower
      ? // Woken again each time the LISTEN is made again (after a lost connection, a failover): a
        // commit announced meanwhile was not heard.
        await sql.listen(
          realtimeCommittedChannel,
          () => follower.wake(),
          () => follower.wake(),
        )
      : null;
    host.afterCommit.subscribe({
      ...(handoffMode ? { realtimeHandoff: handoffMode } : {}),
      committed: (work) => {
        if (work.realtime.length > 0) {
          handoff?.take(work.realtime);
          followerWakeup?.committed();
        }
        // With the hand-off, the relay's loop only sweeps up what it failed to publish (it polls).
        if (work.outbox && !handoff) relay?.wake();
      },
    });
    if (relay) host.clock.onJump?.(() => relay.wake());
    return {
      loops: [...(relay ? [relay] : []), ...(follower ? [follower] : [])],
      routes: async (app) => {
        const status = host.need('status').reads;
        // What realtime tokens and the task stream read: tasks, their ACL, and the tenant's applications.
        const reads = {
          task: (taskId: string) => status.task(taskId),
          canView: (taskId: string, viewer: Viewer) => status.canView(taskId, viewer),
          applicationsOf: identity.applicationsOf,
        };
        identity.revocations.subscribe(
          realtimeRevocations({
            gateway,
            centrifugo: publishesElsewhere(settings)
              ? new CentrifugoUnsubscribe(settings.centrifugoApiUrl!, settings.centrifugoApiKey!)
              : null,
            canView: reads.canView,
            logger,
          }),
        );
        gateway.attach(app.server);
        // The gateway's connections end first: they would hold the listener open.
        app.addHook('preClose', closeGateway);
        registerRealtimeRoutes(app, {
          authenticator: identity.authenticator,
          key,
          clock,
          reads,
          wsUrl: settings.realtimeWsUrl,
          detailSubscriptions: (clientId) => gateway.subscriptionCount(clientId, 'task_detail:'),
          // With Centrifugo, the detail limit is kept by leases every replica shares (the gateway's
          // count covers only connections to this process).
          detailLeases:
            settings.centrifugoApiUrl && settings.centrifugoApiKey
              ? {
                  leases: new PostgresDetailLeases(sql),
                  presence: new CentrifugoPresence(settings.centrifugoApiUrl, settings.centrifugoApiKey),
                }
              : null,
        });
        registerBroadcastRoutes(app, {
          gate: host.need('operators').gate,
          authenticator: identity.authenticator,
          broadcasts: {
            store: new PostgresBroadcastStore(sql),
            clock,
            ids: host.ids,
            tenantExists: async (tenantId) => (await identity.store.getTenant(tenantId)) !== null,
            // The relay's loop in this process publishes it now (another replica's finds it when it polls).
            committed: () => host.loops.wake('realtime'),
          },
        });
        registerTelemetryRoutes(app, {
          userTokens: identity.userTokens,
          clock,
          commitToVisible: host.taskMetrics.commitToVisible,
          maxSamples: settings.visibilityReportMaxSamples,
          rate: settings.visibilityReportRate,
        });
        registerTaskStreamRoutes(app, {
          gateway,
          userTokens: identity.userTokens,
          clock,
          reads,
          keepAliveMs: host.settings.sseKeepAliveMs,
          revocations: identity.revocations,
          // …and the task streams are known to every replica, so a watch-set PUT may reach any of them.
          shared: publishesElsewhere(settings) ? new PostgresStreamSessions(sql) : null,
        });
      },
      stop: async () => {
        await closeGateway();
        await handoff?.idle();
        await stopListening(followerListener?.unlisten);
      },
    };
  },
});
