/**
 * Publish-time rules of the step kinds (approval, signal, sleep, map, child task) and their normal form.
 * Pure: the JSON Schemas a kind carries are returned for the caller to compile (`kindSchemas`).
 */
import {
  type FieldError,
  type PublishWorkflowDefinitionRequest,
  type StepDefinition,
  stepKind,
} from '@tdp/protocol';
import { checkMapping, checkReference } from './references.ts';

type StepInput = PublishWorkflowDefinitionRequest['steps'][number];

/** The kind fields of a stored step: a map runs its capability; the other platform kinds run none. */
export function normaliseKind(
  step: StepInput,
): Pick<StepDefinition, 'capability' | 'capabilityVersion'> & Partial<StepDefinition> {
  const kind = stepKind(step);
  const options = {
    ...(step.kind !== undefined ? { kind } : {}),
    ...(step.sleep ? { sleep: step.sleep } : {}),
    ...(step.signal ? { signal: step.signal } : {}),
    ...(step.approval ? { approval: step.approval } : {}),
    ...(step.map ? { map: step.map } : {}),
    ...(step.task ? { task: step.task } : {}),
  };
  if (kind === 'map' && step.map) {
    return {
      ...options,
      capability: step.map.capability.trim(),
      capabilityVersion: step.map.capabilityVersion.trim(),
    };
  }
  return {
    ...options,
    capability: step.capability?.trim() ?? '',
    capabilityVersion: step.capabilityVersion?.trim() ?? '',
  };
}

const kindKeys = ['sleep', 'signal', 'approval', 'map', 'task'] as const;

/** A step's kind options: present for its own kind, absent for every other. */
export function validateStepKind(steps: StepDefinition[], step: StepDefinition, index: number): FieldError[] {
  const kind = stepKind(step);
  const at = (field: string) => `/steps/${index}/${field}`;
  const errors: FieldError[] = kindKeys
    .filter((key) => key !== kind && step[key] !== undefined)
    .map((key) => ({
      path: at(key),
      message: `"${key}" options belong to a step of kind "${key}", not "${kind}"`,
    }));
  const needs = (key: (typeof kindKeys)[number]) =>
    step[key] === undefined
      ? [{ path: at(key), message: `a step of kind "${kind}" needs its "${key}" options` }]
      : [];
  switch (kind) {
    case 'capability':
      if (!step.capability) errors.push({ path: at('capability'), message: 'capability is required' });
      if (!step.capabilityVersion)
        errors.push({ path: at('capabilityVersion'), message: 'capabilityVersion is required' });
      return errors;
    case 'sleep': {
      errors.push(...needs('sleep'));
      const sleep = step.sleep;
      if (sleep && (sleep.durationMs === undefined) === (sleep.until === undefined)) {
        errors.push({ path: at('sleep'), message: 'a sleep needs exactly one of durationMs and until' });
      }
      if (sleep?.until !== undefined)
        errors.push(...checkReference(steps, step, sleep.until, at('sleep/until')));
      return errors;
    }
    case 'signal':
      return [...errors, ...needs('signal')];
    case 'approval': {
      errors.push(...needs('approval'));
      const approvers = step.approval?.approvers;
      const named = [approvers?.users, approvers?.roles, approvers?.projects].some(
        (l) => (l?.length ?? 0) > 0,
      );
      if (approvers && !named && !approvers.owner) {
        errors.push({
          path: at('approval/approvers'),
          message:
            'name at least one approver (users, roles or projects), or let the owner decide (owner: true)',
        });
      }
      return errors;
    }
    case 'map': {
      errors.push(...needs('map'));
      if (!step.map) return errors;
      errors.push(...checkReference(steps, step, step.map.items, at('map/items')));
      errors.push(...checkMapping(steps, step, step.map.inputMapping ?? {}, at('map/inputMapping'), true));
      return errors;
    }
    case 'task':
      errors.push(...needs('task'));
      if (step.task)
        errors.push(...checkMapping(steps, step, step.task.inputMapping ?? {}, at('task/inputMapping')));
      return errors;
    default: {
      const unknown: never = kind;
      return [{ path: at('kind'), message: `unknown step kind "${String(unknown)}"` }];
    }
  }
}

/** The JSON Schemas the steps carry (a signal's payload, an approval's form), with their paths. */
export function kindSchemas(steps: StepDefinition[]): { path: string; schema: Record<string, unknown> }[] {
  return steps.flatMap((step, index) => [
    ...(step.signal?.payloadSchema
      ? [{ path: `/steps/${index}/signal/payloadSchema`, schema: step.signal.payloadSchema }]
      : []),
    ...(step.approval?.formSchema
      ? [{ path: `/steps/${index}/approval/formSchema`, schema: step.approval.formSchema }]
      : []),
  ]);
}
