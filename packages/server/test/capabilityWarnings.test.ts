import { describe, expect, it } from 'vitest';
import { capabilityWarnings, nearest } from '../src/core/definitions/capabilityWarnings.ts';

const step = (key: string, capability: string, capabilityVersion = '1', kind?: 'map' | 'sleep') => ({
  key,
  capability,
  capabilityVersion,
  ...(kind ? { kind } : {}),
});
const offered = [
  { name: 'image.watermark', version: '1' },
  { name: 'image.watermark', version: '2' },
  { name: 'image.resize', version: '1' },
  { name: 'zip.names', version: '1' },
];

describe('capabilityWarnings', () => {
  it('warns of a misspelt name with the nearest offered names, closest first', () => {
    const [warning, ...rest] = capabilityWarnings([step('mark', 'image.watermrk')], offered);
    expect(rest).toEqual([]);
    expect(warning).toEqual({
      code: 'CAPABILITY_NOT_OFFERED',
      stepKey: 'mark',
      capability: 'image.watermrk',
      capabilityVersion: '1',
      suggestions: ['image.watermark@1', 'image.watermark@2'],
      message:
        'step mark: no registered worker offers image.watermrk@1; did you mean image.watermark@1 or image.watermark@2?',
    });
  });

  it('warns of a version no worker offers, suggesting the offered versions', () => {
    const [warning] = capabilityWarnings([step('mark', 'image.watermark', '3')], offered);
    expect(warning?.suggestions).toEqual(['image.watermark@1', 'image.watermark@2']);
  });

  it('says nothing of offered capabilities or of platform steps, and checks a map step', () => {
    expect(capabilityWarnings([step('a', 'image.resize'), step('b', '', '', 'sleep')], offered)).toEqual([]);
    expect(capabilityWarnings([step('items', 'zip.nmes', '1', 'map')], offered)).toMatchObject([
      { stepKey: 'items', suggestions: ['zip.names@1'] },
    ]);
  });

  it('suggests nothing when nothing is near, or no worker is registered', () => {
    expect(capabilityWarnings([step('x', 'billing.charge')], offered)[0]?.message).toBe(
      'step x: no registered worker offers billing.charge@1',
    );
    expect(capabilityWarnings([step('x', 'image.resize')], [])[0]?.suggestions).toEqual([]);
  });
});

describe('nearest names', () => {
  it('suggests names within three edits, closest first', () => {
    expect(nearest('zip.nmes@1', ['zip.names@1', 'image.resize@1'])).toEqual(['zip.names@1']);
    expect(nearest('image.watermrk@1', ['image.watermark@2', 'image.watermark@1'])).toEqual([
      'image.watermark@1',
      'image.watermark@2',
    ]);
    expect(nearest('billing.charge@1', ['image.watermark@1'])).toEqual([]);
  });
});
