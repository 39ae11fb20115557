/**
 * Type-level tests of defineWorkflow() and the capability catalogue: `tsc -b` compiles this file, so
 * each `@ts-expect-error` fails the build if the line it marks stops being a type error. Nothing runs it.
 */
import type { archiveClean, imageWatermark } from '@tdp/capabilities';
import type { TaskWithExecution } from '@tdp/protocol';
import { defineCapability } from '@tdp/worker';
import { Type } from 'typebox';
import {
  type CapabilityCatalogue,
  type CatalogueOf,
  createTdpClient,
  defineWorkflow,
  nodeCallbackHandler,
  outputsOf,
  type TdpApiError,
  type WorkflowInput,
  type WorkflowOutputs,
} from '../src/index.ts';

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

// Or derived from the capabilities' own definitions (CatalogueOf): no copy to keep in step by hand.
const summarize = defineCapability({
  name: 'text.summarize',
  version: '1',
  input: Type.Object({ text: Type.String(), maxWords: Type.Optional(Type.Integer()) }),
  output: Type.Object({ summary: Type.String(), words: Type.Integer() }),
  run: async (_ctx, { text }) => ({ summary: text, words: 1 }),
});
const unnamed: string = 'text.anything';
const anonymous = defineCapability({
  name: unnamed,
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: async () => ({}),
});
const derivedCapabilities = { summarize, anonymous, notACapability: 42 };
declare module '@tdp/sdk' {
  interface CapabilityCatalogue extends CatalogueOf<typeof derivedCapabilities> {}
}
export const derivedCatalogue: [true, true, true] = [
  true as Same<CapabilityCatalogue['text.summarize']['output'], { summary: string; words: number }>,
  true as Same<CapabilityCatalogue['text.summarize']['input'], { text: string; maxWords?: number }>,
  // A capability whose name is not a literal is left out, not made a catalogue of every name.
  true as Same<Extract<keyof CatalogueOf<typeof derivedCapabilities>, string>, 'text.summarize'>,
];
const summarized = start.step('summarize', {
  capability: 'text.summarize',
  capabilityVersion: '1',
  inputMapping: { text: '$.input.text' },
});
summarized.step('render', {
  capability: 'pdf.render',
  capabilityVersion: '1',
  dependsOn: ['summarize'],
  inputMapping: { template: '$.steps.summarize.output.summary' },
});
summarized.step('render', {
  capability: 'pdf.render',
  capabilityVersion: '1',
  dependsOn: ['summarize'],
  // @ts-expect-error text.summarize's output field is `summary` (a renamed field breaks the workflow)
  inputMapping: { template: '$.steps.summarize.output.abstract' },
});
start.step('summarize', {
  capability: 'text.summarize',
  capabilityVersion: '1',
  // @ts-expect-error maxWords is a number, by the capability's own schema
  inputMapping: { text: '$.input.text', maxWords: 'ten' },
});

// Map steps: `items` reads an array, `$.item…` a path of its element, and the output is the item outputs.
const pagesInput = Type.Object({
  title: Type.String(),
  copies: Type.Optional(Type.Integer()),
  pages: Type.Array(Type.Object({ index: Type.Integer(), template: Type.String() })),
  tags: Type.Array(Type.String()),
  nested: Type.Object({ sheets: Type.Optional(Type.Array(Type.Object({ layout: Type.String() }))) }),
});
const paged = defineWorkflow({ name: 'paged', version: '1', inputSchema: pagesInput });
const perRemoved = cleaned.map('render-each', {
  dependsOn: ['clean'],
  items: '$.steps.clean.output.removed',
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: '$.item.path', copies: { from: '$.input.copies', default: 1 } },
  maxParallel: 4,
  retry: { maxAttempts: 3 },
});
// A map over a map's output, whose items are pdf.render's outputs.
const perDocument = perRemoved.map('archive-each', {
  dependsOn: ['render-each'],
  items: '$.steps.render-each.output',
  capability: 'archive.clean',
  capabilityVersion: '1',
  inputMapping: { source: '$.item.document' },
  onItemFailure: 'CONTINUE',
});
type PdfOutput = CapabilityCatalogue['pdf.render']['output'];
type CleanOutput = CapabilityCatalogue['archive.clean']['output'];
export const mapOutputs: [true, true] = [
  true as Same<WorkflowOutputs<typeof perDocument>['render-each'], PdfOutput[]>,
  true as Same<
    WorkflowOutputs<typeof perDocument>['archive-each'],
    ({ output: CleanOutput } | { error: { code: string; message?: string } })[]
  >,
];
// Over the task input (TypeBox), three levels deep, and over items that are not objects.
paged
  .map('pages', {
    items: '$.input.pages',
    capability: 'pdf.render',
    capabilityVersion: '1',
    inputMapping: { template: '$.item.template', copies: { from: '$.item.index', optional: true } },
  })
  .map('sheets', {
    items: '$.input.nested.sheets',
    capability: 'pdf.render',
    capabilityVersion: '1',
    inputMapping: { template: '$.item.layout' },
  })
  .map('tags', {
    items: '$.input.tags',
    capability: 'pdf.render',
    capabilityVersion: '1',
    inputMapping: { template: '$.item' },
  });
// Where the type is unknown (a capability not catalogued, an input without a TypeBox schema), anything goes.
start
  .step('list', { capability: 'list.files', capabilityVersion: '1' })
  .map('each', {
    dependsOn: ['list'],
    items: '$.steps.list.output.files',
    capability: 'file.scan',
    capabilityVersion: '1',
    inputMapping: { path: '$.item.path.to.anything', label: '$.input.label' },
  })
  .map('again', {
    items: '$.input.whatever',
    capability: 'pdf.render',
    capabilityVersion: '1',
    inputMapping: { template: '$.item.name' },
  });

cleaned.map('render-each', {
  dependsOn: ['clean'],
  // @ts-expect-error archive.clean's `archive` is a string, not an array
  items: '$.steps.clean.output.archive',
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: 'x' },
});
paged.map('pages', {
  // @ts-expect-error the input's `title` is a string, not an array
  items: '$.input.title',
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: 'x' },
});
cleaned.map('render-each', {
  // @ts-expect-error reads `clean` without depending on it
  items: '$.steps.clean.output.removed',
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: 'x' },
});
paged.map('pages', {
  items: '$.input.pages',
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error a page has no field `nope`
  inputMapping: { template: '$.item.nope' },
});
paged.map('pages', {
  items: '$.input.pages',
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error an entry's `from` is checked against the item too
  inputMapping: { template: { from: '$.item.nope', default: 'a4' } },
});
paged.map('tags', {
  items: '$.input.tags',
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error a tag is a string: it has no fields
  inputMapping: { template: '$.item.length' },
});
paged.map('pages', {
  items: '$.input.pages',
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error pdf.render takes no field `templat`
  inputMapping: { template: '$.item.template', templat: '$.item.index' },
});
paged.map('pages', {
  items: '$.input.pages',
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error pdf.render's `template` is required
  inputMapping: { copies: '$.item.index' },
});
paged.map('pages', {
  items: '$.input.pages',
  capability: 'pdf.render',
  capabilityVersion: '1',
  inputMapping: { template: 'x' },
  // @ts-expect-error not an item failure policy
  onItemFailure: 'SKIP',
});
paged.step('render', {
  capability: 'pdf.render',
  capabilityVersion: '1',
  // @ts-expect-error `$.item` is read only in a map
  inputMapping: { template: '$.item' },
});
perRemoved.step('archive', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  dependsOn: ['render-each'],
  // @ts-expect-error a map's output is a list: it has no field `document`
  inputMapping: { source: '$.steps.render-each.output.document' },
});

// End to end: a workflow value types its tasks' input, its results and its callbacks.
const typedWorkflow = defineWorkflow({
  name: 'typed',
  version: '1',
  inputSchema: Type.Object({ sourceZip: Type.String(), caption: Type.Optional(Type.String()) }),
})
  .step('clean', {
    capability: 'archive.clean',
    capabilityVersion: '1',
    inputMapping: { source: '$.input.sourceZip' },
  })
  .step('render', {
    capability: 'pdf.render',
    capabilityVersion: '1',
    dependsOn: ['clean'],
    inputMapping: { template: '$.steps.clean.output.archive' },
  })
  .builtIn('approve', {
    kind: 'approval',
    dependsOn: ['render'],
    approval: { approvers: { users: ['u1'] } },
  });
export const typedInput: true = true as Same<
  WorkflowInput<typeof typedWorkflow>,
  { sourceZip: string; caption?: string }
>;
// A plain JSON Schema (or none) leaves the input unknown: anything goes, as the server alone checks it.
const looseWorkflow = defineWorkflow({
  name: 'loose',
  version: '1',
  inputSchema: { type: 'object', properties: { n: { type: 'number' } } },
}).step('clean', {
  capability: 'archive.clean',
  capabilityVersion: '1',
  inputMapping: { source: '$.input.n' },
});
export const looseInput: true = true as Same<WorkflowInput<typeof looseWorkflow>, unknown>;

export async function typedEndToEnd(): Promise<void> {
  const tdp = createTdpClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'tdp_x' });
  const created = await tdp.createTask(typedWorkflow, { name: 'n', input: { sourceZip: 'res_1' } });
  await tdp.createTask(typedWorkflow, {
    name: 'n',
    input: { sourceZip: 'res_1', caption: 'c' },
    priority: 10,
  });
  // @ts-expect-error the input misses its required `sourceZip`
  await tdp.createTask(typedWorkflow, { name: 'n', input: { caption: 'c' } });
  // @ts-expect-error `sourceZip` is a string
  await tdp.createTask(typedWorkflow, { name: 'n', input: { sourceZip: 1 } });
  // @ts-expect-error the input is required when its type has required fields
  await tdp.createTask(typedWorkflow, { name: 'n' });
  // @ts-expect-error the workflow value gives the name and version
  await tdp.createTask(typedWorkflow, { name: 'n', input: { sourceZip: 'x' }, workflowName: 'other' });
  await tdp.createTask(looseWorkflow, { name: 'n', input: 'anything' });
  await tdp.createTask(looseWorkflow, { name: 'n' });

  // Results: each succeeded step's output, typed by its capability; every one may be missing.
  const result = await tdp.waitForResult(typedWorkflow, created, { timeoutMs: 1000 });
  const archive: string | undefined = result.outputs.clean?.archive;
  const pages: number | undefined = result.outputs.render?.pages;
  const approval: unknown = result.outputs.approve;
  // @ts-expect-error archive.clean gives no `archives`
  result.outputs.clean?.archives;
  // @ts-expect-error an output may be missing (the step failed, was skipped or never ran)
  result.outputs.clean.archive;
  // @ts-expect-error no step `watermark` in this workflow
  result.outputs.watermark;
  const view: TaskWithExecution = await tdp.waitForTask(created.task.id, { timeoutMs: 1000 });
  const kept: number | undefined = outputsOf(typedWorkflow, view).clean?.keptFiles;
  void [archive, pages, approval, kept];

  // Callbacks: `data.outputs` typed by the workflow the endpoint serves.
  nodeCallbackHandler({
    secrets: ['s'],
    workflow: typedWorkflow,
    onCallback(event) {
      const document: string | undefined = event.data.outputs?.render?.document;
      // @ts-expect-error pdf.render gives no `documents`
      event.data.outputs?.render?.documents;
      void document;
    },
  });
  nodeCallbackHandler({
    secrets: ['s'],
    onCallback(event) {
      // Without a workflow, outputs are unknown values by step key, as before.
      const anything: unknown = event.data.outputs?.whatever;
      void anything;
    },
  });
}
