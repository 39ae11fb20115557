/**
 * Type-level tests of defineWorkflow() and the capability catalogue: `tsc -b` compiles this file, so
 * each `@ts-expect-error` fails the build if the line it marks stops being a type error. Nothing runs it.
 */
import type { archiveClean, imageWatermark } from '@tdp/capabilities';
import { type CapabilityCatalogue, createTdpClient, defineWorkflow, type TdpApiError } from '../src/index.ts';

const start = defineWorkflow({ name: 'types', version: '1' });
const cleaned = start.step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  inputMapping: { source: '$.input.sourceZip', defaultJunk: true },
});

// A sound workflow: a known output field, a transitive upstream step, a capability not catalogued.
cleaned
  .step('watermark', {
    capability: 'image.watermark',
    capabilityVersion: '1',
    dependsOn: ['clean'],
    inputMapping: { source: '$.steps.clean.output.archive', text: '$.input.text', opacity: 0.5 },
  })
  .step('notify', {
    capability: 'mail.send',
    capabilityVersion: '1',
    dependsOn: ['watermark'],
    inputMapping: { zip: '$.steps.watermark.output.archive', kept: '$.steps.clean.output.keptFiles' },
  })
  .step('audit', {
    capability: 'audit.write',
    capabilityVersion: '1',
    dependsOn: ['notify'],
    inputMapping: { anything: '$.steps.notify.output.whatever.it.is' },
  });

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  dependsOn: ['clean'],
  // @ts-expect-error archive.clean has no output `archives`
  inputMapping: { source: '$.steps.clean.output.archives', text: 'x' },
});

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  // @ts-expect-error `later` is not a step defined before this one
  dependsOn: ['later'],
  inputMapping: { source: '$.input.zip', text: 'x' },
});

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  // @ts-expect-error reads `clean` without depending on it
  inputMapping: { source: '$.steps.clean.output.archive', text: 'x' },
});

// @ts-expect-error a step key used twice
cleaned.step('clean', { capability: 'archive.clean', capabilityVersion: '1', inputMapping: { source: 'x' } });

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  dependsOn: ['clean'],
  // @ts-expect-error image.watermark's `text` is required
  inputMapping: { source: '$.steps.clean.output.archive' },
});

start.step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  // @ts-expect-error a literal of the wrong type (source is a string)
  inputMapping: { source: 42 },
});

start.step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  // @ts-expect-error archive.clean takes no field `src`
  inputMapping: { source: 'x', src: 'y' },
});

start.step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  // @ts-expect-error `$.` that is neither the input nor a step output
  inputMapping: { source: '$.env.HOME' },
});

start.step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  inputMapping: { source: 'x' },
  // @ts-expect-error not a failure policy
  failurePolicy: 'IGNORE',
});

// A value that may be absent: optional (left out) or with a default of the field's type.
cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  dependsOn: ['clean'],
  inputMapping: {
    source: '$.steps.clean.output.archive',
    text: { from: '$.input.caption', default: 'draft' },
    opacity: { from: '$.input.opacity', optional: true },
  },
});

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  dependsOn: ['clean'],
  // @ts-expect-error a default of the wrong type (text is a string)
  inputMapping: { source: '$.steps.clean.output.archive', text: { from: '$.input.caption', default: 7 } },
});

cleaned.step('watermark', {
  capability: 'image.watermark',
  capabilityVersion: '1',
  // @ts-expect-error an entry's `from` reads `clean` without depending on it
  inputMapping: { source: { from: '$.steps.clean.output.archive', optional: true }, text: 'x' },
});

// @ts-expect-error a catalogued capability with required input needs its mapping
start.step('clean', { capability: 'archive.clean', capabilityVersion: '1' });

// The catalogue says what the built-in capabilities really take and give (their schemas in @tdp/worker).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type WorkerOutput<C extends { run: (...args: never[]) => unknown }> = Awaited<ReturnType<C['run']>>;
type WorkerInput<C extends { run: (ctx: never, input: never) => unknown }> = Parameters<C['run']>[1];
export const catalogueMatchesWorker: [true, true, true, true] = [
  true as Same<CapabilityCatalogue['archive.clean']['output'], WorkerOutput<typeof archiveClean>>,
  true as Same<CapabilityCatalogue['image.watermark']['output'], WorkerOutput<typeof imageWatermark>>,
  true as Same<
    Omit<CapabilityCatalogue['archive.clean']['input'], 'nameEncoding'>,
    Omit<WorkerInput<typeof archiveClean>, 'nameEncoding'>
  >,
  true as Same<
    Omit<CapabilityCatalogue['image.watermark']['input'], 'position'>,
    Omit<WorkerInput<typeof imageWatermark>, 'position'>
  >,
];

// Problem codes are the protocol's union.
export function branch(error: TdpApiError): string {
  // @ts-expect-error not an error code of the protocol
  if (error.code === 'TASK_MISSING') return 'never';
  return error.code === 'TASK_NOT_FOUND' ? 'gone' : 'other';
}

// Requests are the protocol's types.
export async function requests(): Promise<void> {
  const tdp = createTdpClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'tdp_x' });
  // @ts-expect-error a task needs a name
  await tdp.createTask({ workflowName: 'w', workflowVersion: '1' });
  // @ts-expect-error not a lifecycle status
  await tdp.listTasks({ status: 'DONE' });
  // @ts-expect-error not a principal type
  await tdp.revokeTaskAccess('t', 'GROUP', 'g');
  const { task } = await tdp.createTask({ workflowName: 'w', workflowVersion: '1', name: 'n' });
  // @ts-expect-error the task view has no such field
  task.state;
}

// Your own capabilities join the catalogue by declaration merging, and are then checked too.
declare module '@tdp/sdk' {
  interface CapabilityCatalogue {
    'pdf.render': {
      input: { template: string; copies?: number };
      output: { document: string; pages: number };
    };
  }
}
const rendered = start.step('render', {
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: '$.input.template' },
});
rendered.step('archive', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  dependsOn: ['render'],
  inputMapping: { source: '$.steps.render.output.document' },
});
rendered.step('archive', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  dependsOn: ['render'],
  // @ts-expect-error pdf.render gives no `documents`
  inputMapping: { source: '$.steps.render.output.documents' },
});
start.step('render', {
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error copies is a number
  inputMapping: { template: 't', copies: 'two' },
});
