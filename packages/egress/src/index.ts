/**
 * `@tdp/egress`: the one egress policy of every request TDP makes on a tenant's behalf (worker downloads
 * and uploads, callbacks, notification webhooks, resource-provider calls), shared by server and worker.
 * `@tdp/egress/policy` is its pure half (addresses and the allow-list), for checks at input time.
 */
import type { Agent } from 'undici';
import { type EgressAgentOptions, egressAgent } from './agent.ts';
import { type EgressPolicy, egressPolicy } from './policy.ts';

export { type EgressAgentOptions, egressAgent } from './agent.ts';
export { EgressError, type EgressFailure, egressErrorOf } from './errors.ts';
export {
  EgressAllowListError,
  type EgressPolicy,
  egressPolicy,
  isPublicAddress,
  loopbackAllowList,
  refusedLiteral,
  splitAllowList,
} from './policy.ts';
export { type EgressRequestOptions, type EgressResponse, egressRequest } from './request.ts';

/** A policy and the connections that keep to it, made once per process and closed with it. */
export interface Egress {
  readonly policy: EgressPolicy;
  readonly agent: Agent;
  close(): Promise<void>;
}

export function createEgress(allow: string | readonly string[], options: EgressAgentOptions = {}): Egress {
  const policy = egressPolicy(allow);
  const agent = egressAgent(policy, options);
  return { policy, agent, close: () => agent.close() };
}
