/**
 * gRPC reporting (docs/grpc.md): workers report events and heartbeats over a gRPC stream, through the
 * same status service and the same checks as the REST routes. Registration announces its port.
 */
import { Type } from 'typebox';
import { startGrpcReporting } from '../../adapters/inbound/grpc/server.ts';
import { statusCallers } from '../../adapters/inbound/http/statusRouteContext.ts';
import { defineFeature } from '../../host/feature.ts';
import { ConfigError, integerVariable, setting, settingsSlice } from '../../host/settings.ts';

export interface GrpcReporting {
  /** The port workers are told to report to; null when the setting turns it off. */
  port: number | null;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    grpc: GrpcReporting;
  }
}

const settings = settingsSlice(
  Type.Object({
    grpcPort: setting.custom<number | null>({
      variables: ['TDP_GRPC_PORT'],
      typeName: 'port or `off`',
      default: 0,
      defaultText: '`0` (a free port, announced to workers)',
      description: 'The gRPC reporting port (docs/grpc.md); `off` turns it off.',
      parse: (env) => {
        const raw = env.TDP_GRPC_PORT?.trim();
        if (!raw) return undefined;
        if (raw.toLowerCase() === 'off') return null;
        const port = integerVariable(env, 'TDP_GRPC_PORT', 0);
        if (port > 65_535) throw new ConfigError('TDP_GRPC_PORT must be a port number or off');
        return port;
      },
    }),
    grpcStreamWindow: setting.value({
      // A window of a few rounds of REST's batch size (200): the stream's rounds stay large under load.
      default: 1_000,
      description: 'Requests a gRPC report stream may have unanswered at once (its flow-control window).',
    }),
    grpcStreamMaxBindings: setting.value({
      default: 10_000,
      description: 'Executions bound at once on one gRPC report stream; one more forgets the oldest.',
    }),
    grpcCloseGraceMs: setting.value({
      default: 5_000,
      description: 'On shutdown, open gRPC streams get this long to end before they are cut.',
    }),
    grpcStreamRoundSize: setting.value({
      default: 200,
      description:
        "Requests one round of a gRPC stream takes at most: one transaction (the worker sender's batch).",
    }),
  }),
);

export const grpcFeature = defineFeature({
  name: 'grpc',
  settings,
  async start(host, settings) {
    if (settings.grpcPort === null) {
      host.provide('grpc', { port: null });
      return {};
    }
    const identity = host.need('identity');
    const status = host.need('status');
    const callers = statusCallers({
      authenticator: identity.authenticator,
      status: status.deps,
      reads: { reads: status.reads, clock: host.clock, ids: host.ids },
      userTokens: identity.userTokens,
      rateLimits: identity.rateLimits,
    });
    const grpc = await startGrpcReporting(
      {
        status: status.deps,
        callers,
        workers: host.need('workers').registration,
        rateLimits: identity.rateLimits,
        logger: host.logger,
        streamWindow: settings.grpcStreamWindow,
        streamMaxBindings: settings.grpcStreamMaxBindings,
        streamRoundSize: settings.grpcStreamRoundSize,
        jsonMaxDepth: host.settings.jsonMaxDepth,
      },
      { host: host.settings.host, port: settings.grpcPort },
    );
    host.provide('grpc', { port: grpc.port });
    let closing: Promise<void> | null = null;
    const close = () => {
      closing ??= grpc.close(settings.grpcCloseGraceMs);
      return closing;
    };
    return {
      // The gRPC listener closes with the HTTP listener, before the loops stop.
      routes: async (app) => {
        app.addHook('onClose', close);
      },
      stop: close,
    };
  },
});
