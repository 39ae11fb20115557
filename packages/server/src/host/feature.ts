/**
 * What a feature is to the host. A feature module (`features/<name>/feature.ts`) declares in one place
 * its settings slice, what it builds from the host's connections when it starts, its routes (a Fastify
 * plugin), its loops, its after-commit subscriptions (`host.afterCommit.subscribe` in `start`), what it
 * provides to the features after it, and its stop.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { Static, TObject } from 'typebox';

/** The settings of a feature that has none. */
type NoSettings = TObject<Record<never, never>>;

import type { Host } from './host.ts';
import type { WakeableLoop } from './loops/wakeableLoop.ts';
import type { SettingsSlice } from './settings.ts';

export interface Feature<S extends TObject = NoSettings> {
  readonly name: string;
  readonly settings?: SettingsSlice<S>;
  start(host: Host, settings: Static<S>): StartedFeature | Promise<StartedFeature>;
}

export interface StartedFeature {
  /**
   * Registered once every feature has started, so a route may use what a later feature provides
   * (`host.need` inside the plugin). Encapsulated: its hooks and decorations stay its own.
   */
  routes?: FastifyPluginAsync;
  /** Started once the server listens; stopped, before any feature's `stop`, when it closes. */
  loops?: WakeableLoop[];
  /** Releases what `start` acquired, after every loop of every feature has stopped. */
  stop?: () => Promise<void>;
}

/** Declares a feature with its settings' static type inferred from its slice. */
export const defineFeature = <S extends TObject = NoSettings>(feature: Feature<S>): Feature<S> => feature;

/** The settings type of a list of features: every slice's fields together. */
export type SettingsOf<F extends readonly Feature<TObject>[]> = UnionToIntersection<
  { [K in keyof F]: F[K] extends Feature<infer S> ? Static<S> : never }[number]
>;

type UnionToIntersection<U> = (U extends unknown ? (value: U) => void : never) extends (
  value: infer I,
) => void
  ? I
  : never;
