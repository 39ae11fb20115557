import { describe, expect, it } from 'vitest';
import {
  findCycle,
  normaliseSteps,
  parseMappingReference,
  upstreamOf,
  validateSteps,
} from '../src/core/definitions/dag.ts';

const step = (key: string, dependsOn: string[] = [], inputMapping: Record<string, unknown> = {}) => ({
  key,
  capability: `cap.${key}`,
  capabilityVersion: '1',
  dependsOn,
  inputMapping,
});

const messages = (steps: ReturnType<typeof step>[]) =>
  validateSteps(normaliseSteps(steps)).map((e) => e.message);

describe('workflow definition validation', () => {
  it('accepts the clean-then-watermark DAG', () => {
    expect(
      messages([
        step('clean', [], { source: '$.input.sourceZip' }),
        step('watermark', ['clean'], { archive: '$.steps.clean.output.archive' }),
      ]),
    ).toEqual([]);
  });

  it('names the cycle as a path', () => {
    expect(messages([step('clean', ['watermark']), step('watermark', ['clean'])])).toEqual([
      'dependency cycle: clean -> watermark -> clean',
    ]);
    expect(
      findCycle(normaliseSteps([step('a'), step('b', ['a', 'd']), step('c', ['b']), step('d', ['c'])])),
    ).toEqual(['b', 'd', 'c', 'b']);
  });

  it('rejects duplicate keys, self and unknown dependencies, naming both steps', () => {
    expect(messages([step('clean'), step('clean')])).toEqual(['step key "clean" is already used by step 0']);
    expect(messages([step('clean', ['clean'])])).toEqual(['step "clean" depends on itself']);
    expect(messages([step('watermark', ['clean'])])).toEqual([
      'step "watermark" depends on "clean", which is not a step of this workflow',
    ]);
  });

  it('lets a step read only the task input or steps upstream of it', () => {
    expect(messages([step('a', [], { x: '$.steps.b.output.y' }), step('b', [])])).toEqual([
      'step "a" reads the output of "b", which is not upstream of it (add it to dependsOn)',
    ]);
    expect(messages([step('a', [], { x: '$.steps.ghost.output' })])).toEqual([
      'step "a" reads the output of "ghost", which is not a step of this workflow',
    ]);
    expect(messages([step('a', [], { x: '$.secrets.token' })])[0]).toMatch(/must be \$\.input/);
    // Transitive upstream is fine: c depends on b which depends on a.
    expect(messages([step('a'), step('b', ['a']), step('c', ['b'], { x: '$.steps.a.output.z' })])).toEqual(
      [],
    );
    // Literals are allowed.
    expect(messages([step('a', [], { mode: 'fast', level: 3, text: 'plain' })])).toEqual([]);
  });

  it('parses mapping references', () => {
    expect(parseMappingReference('$.input')).toEqual({ kind: 'input', path: [] });
    expect(parseMappingReference('$.input.a.b')).toEqual({ kind: 'input', path: ['a', 'b'] });
    expect(parseMappingReference('$.steps.clean.output.archive')).toEqual({
      kind: 'step',
      stepKey: 'clean',
      path: ['archive'],
    });
    expect(parseMappingReference('$.steps.clean')).toBe('invalid');
    expect(parseMappingReference('$.input..x')).toBe('invalid');
    expect(parseMappingReference('literal')).toBeNull();
    expect(parseMappingReference(42)).toBeNull();
  });

  it('computes transitive upstream steps', () => {
    const steps = normaliseSteps([step('a'), step('b', ['a']), step('c', ['b']), step('d', ['a'])]);
    expect([...upstreamOf(steps, 'c')].sort()).toEqual(['a', 'b']);
    expect([...upstreamOf(steps, 'a')]).toEqual([]);
  });

  it('fills defaults so snapshots are explicit', () => {
    const [normalised] = normaliseSteps([
      { key: 'a', capability: ' x ', capabilityVersion: '1', retry: { maxAttempts: 5 } },
    ]);
    expect(normalised).toMatchObject({
      capability: 'x',
      dependsOn: [],
      inputMapping: {},
      failurePolicy: 'FAIL_TASK',
      retry: { maxAttempts: 5, initialBackoffMs: 1000, multiplier: 2 },
    });
  });
});
