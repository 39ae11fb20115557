import { describe, expect, it } from 'vitest';
import { normaliseSteps, validateSteps } from '../src/core/definitions/dag.ts';
import {
  schemaGuarantees,
  undeclaredInputMappings,
  unguaranteedMappings,
} from '../src/core/definitions/mappingGuarantees.ts';
import { resolveInput } from '../src/core/orchestration/advance.ts';

const step = (key: string, inputMapping: Record<string, unknown>, dependsOn: string[] = []) => ({
  key,
  capability: `cap.${key}`,
  capabilityVersion: '1',
  dependsOn,
  inputMapping,
});

const schema = {
  type: 'object',
  required: ['title', 'owner'],
  properties: {
    title: { type: 'string' },
    note: { type: 'string' },
    owner: {
      type: 'object',
      required: ['id'],
      properties: { id: { type: 'string' }, email: { type: 'string' } },
    },
  },
};

const refused = (mapping: Record<string, unknown>, inputSchema: Record<string, unknown> = schema) =>
  unguaranteedMappings(normaliseSteps([step('render', mapping)]), inputSchema);

describe('which mapped values the input schema guarantees', () => {
  it('follows required keys of object schemas, level by level', () => {
    expect(schemaGuarantees(schema, [])).toBe(true);
    expect(schemaGuarantees(schema, ['title'])).toBe(true);
    expect(schemaGuarantees(schema, ['owner', 'id'])).toBe(true);
    expect(schemaGuarantees(schema, ['note'])).toBe(false);
    expect(schemaGuarantees(schema, ['owner', 'email'])).toBe(false);
    expect(schemaGuarantees(schema, ['undeclared'])).toBe(false);
    expect(schemaGuarantees(schema, ['title', 'length'])).toBe(false);
  });

  it('needs the value to be an object: `required` alone lets a string input pass', () => {
    expect(schemaGuarantees({ required: ['a'] }, ['a'])).toBe(false);
    expect(schemaGuarantees({ type: ['object'], required: ['a'] }, ['a'])).toBe(true);
    expect(schemaGuarantees({ type: ['object', 'null'], required: ['a'] }, ['a'])).toBe(false);
  });

  it('adds up allOf, and takes from anyOf/oneOf only what every branch guarantees', () => {
    expect(schemaGuarantees({ type: 'object', allOf: [{ required: ['a'] }] }, ['a'])).toBe(true);
    const either = (second: Record<string, unknown>) => ({
      type: 'object',
      oneOf: [{ required: ['a', 'b'] }, second],
    });
    expect(schemaGuarantees(either({ required: ['a'] }), ['a'])).toBe(true);
    expect(schemaGuarantees(either({ required: ['a'] }), ['b'])).toBe(false);
    expect(schemaGuarantees({ $ref: '#/definitions/x' }, ['a'])).toBe(false);
  });
});

describe('required mappings at publish', () => {
  it('refuses a plain reference to an optional input, naming the step, the field and the path', () => {
    const errors = refused({ text: '$.input.note', title: '$.input.title' });
    expect(errors).toHaveLength(1);
    expect(errors[0]!.path).toBe('/steps/0/inputMapping/text');
    expect(errors[0]!.message).toContain('step "render" maps "text" from $.input.note');
    expect(errors[0]!.message).toContain('"optional": true');
    expect(errors[0]!.message).toContain('"default"');
  });

  it('accepts the optional and defaulted forms, literals, the whole input and required paths', () => {
    expect(
      refused({
        text: { from: '$.input.note', optional: true },
        email: { from: '$.input.owner.email', default: 'nobody@example.com' },
        id: '$.input.owner.id',
        all: '$.input',
        mode: 'fast',
        literalObject: { from: 'a literal, not a reference' },
      }),
    ).toEqual([]);
  });

  it('checks the mappings of a map and of a child task too', () => {
    const steps = normaliseSteps([
      {
        key: 'each',
        kind: 'map',
        map: {
          items: '$.input.list',
          capability: 'cap.x',
          capabilityVersion: '1',
          inputMapping: { x: '$.item.x', note: '$.input.note' },
        },
      },
      {
        key: 'child',
        kind: 'task',
        task: { workflowName: 'w', workflowVersion: '1', inputMapping: { note: '$.input.note' } },
      },
    ]);
    expect(unguaranteedMappings(steps, schema).map((e) => e.path)).toEqual([
      '/steps/0/map/inputMapping/note',
      '/steps/1/task/inputMapping/note',
    ]);
  });

  it('does not check a workflow without an inputSchema, nor step outputs whose schema is unknown', () => {
    expect(refused({ text: '$.input.note' }, {})).toEqual([]);
    const steps = normaliseSteps([step('a', {}), step('b', { x: '$.steps.a.output.x' }, ['a'])]);
    expect(unguaranteedMappings(steps, schema)).toEqual([]);
    const known = unguaranteedMappings(steps, schema, (s) =>
      s.key === 'a' ? { type: 'object', properties: { x: {} } } : undefined,
    );
    expect(known.map((e) => e.path)).toEqual(['/steps/1/inputMapping/x']);
    expect(known[0]!.message).toContain('the output schema of step "a"');
  });

  it('names, for a warning, the required $.input mappings of a workflow without an inputSchema', () => {
    const steps = normaliseSteps([
      step('a', {
        x: '$.input.x',
        y: { from: '$.input.y', optional: true },
        z: { from: '$.input.z', default: 1 },
      }),
      step('b', { w: '$.steps.a.output.w', whole: '$.input' }, ['a']),
    ]);
    expect(undeclaredInputMappings(steps, {}).map((w) => [w.stepKey, w.path])).toEqual([
      ['a', '/steps/0/inputMapping/x'],
    ]);
    expect(undeclaredInputMappings(steps, schema)).toEqual([]);
  });
});

describe('the object form of a mapping entry', () => {
  const messages = (mapping: Record<string, unknown>) =>
    validateSteps(normaliseSteps([step('render', mapping)])).map((e) => `${e.path}: ${e.message}`);

  it('refuses malformed entries with the path', () => {
    expect(messages({ a: { from: '$.input.a', optional: true, default: 1 } })).toEqual([
      '/steps/0/inputMapping/a: a mapping entry is either optional or has a default, not both',
    ]);
    expect(messages({ a: { from: '$.input.a', optional: 'yes' } })).toEqual([
      '/steps/0/inputMapping/a: "optional" must be true or false',
    ]);
    expect(messages({ a: { from: '$.input.a', fallback: 1 } })[0]).toContain('not "fallback"');
    expect(messages({ a: { from: '$.env.HOME', optional: true } })[0]).toContain('must be $.input');
    expect(messages({ a: { from: '$.steps.later.output', optional: true } })[0]).toContain(
      'not a step of this workflow',
    );
  });
});

describe('resolving a mapping at run time', () => {
  const definition = (mapping: Record<string, unknown>) => normaliseSteps([step('render', mapping)])[0]!;

  it('leaves an absent optional value out, uses a default, and keeps present values', () => {
    const resolved = resolveInput(
      definition({
        note: { from: '$.input.note', optional: true },
        size: { from: '$.input.size', default: 3 },
        title: { from: '$.input.title', default: 'untitled' },
      }),
      { title: 'Hello' },
      {},
    );
    expect(resolved).toEqual({ ok: true, value: { size: 3, title: 'Hello' } });
  });

  it('fails a missing required value with a message for people and the path in the detail', () => {
    const resolved = resolveInput(definition({ note: '$.input.note' }), {}, {});
    expect(resolved.ok).toBe(false);
    if (resolved.ok) return;
    expect(resolved.code).toBe('INPUT_MAPPING_MISSING');
    expect(resolved.message).not.toContain('$.');
    expect(resolved.detail).toContain('$.input.note');
    expect(resolved.detail).toContain('"note"');
  });
});
