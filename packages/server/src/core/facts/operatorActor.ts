/**
 * How an operator's action reads in a task's history: the event's producer and its payload name the
 * operator (by the name they had when they acted), so a timeline says who corrected, approved or
 * signalled, not just "an operator".
 */
import type { OperatorActor } from './records.ts';

/** The producer of an event an operator caused: `operator:<name>` (`operator:bootstrap admin token`). */
export const operatorProducer = (actor: OperatorActor) => `operator:${actor.name}`;

/** The operator as an event's payload names them. */
export const operatorNamed = (actor: OperatorActor) => ({ id: actor.operatorId, name: actor.name });

/** The audit's actions of the operator's decisions on a task. */
export const operatorTaskActions = {
  approval: 'APPROVAL_DECIDED',
  signal: 'SIGNAL_SENT',
} as const;
