/** When a failed fact transaction runs again (runAgain.ts): the decision alone, for every kind of failure. */
import { describe, expect, it } from 'vitest';
import { runAgain } from '../src/adapters/outbound/postgres/runAgain.ts';

const failure = (code: string) => Object.assign(new Error(code), { code });
const first = { attempt: 1, connectionsLost: 0, committing: false };

describe('runAgain', () => {
  it('runs a deadlocked or serialization-failed transaction again, up to five attempts', () => {
    expect(runAgain(failure('40P01'), first)).toBe('yes');
    expect(runAgain(failure('40001'), { ...first, attempt: 4, committing: true })).toBe('yes');
    expect(runAgain(failure('40001'), { ...first, attempt: 5 })).toBe('no');
  });

  it('runs a transaction whose connection was lost before its commit again, once', () => {
    for (const code of ['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', '57P01'])
      expect(runAgain(failure(code), first)).toBe('on another connection');
    expect(runAgain(failure('CONNECTION_CLOSED'), { ...first, attempt: 2, connectionsLost: 1 })).toBe('no');
  });

  it('never runs again once the commit was sent: its outcome is unknown', () => {
    expect(runAgain(failure('CONNECTION_CLOSED'), { ...first, committing: true })).toBe('no');
    expect(runAgain(failure('ECONNRESET'), { ...first, committing: true })).toBe('no');
  });

  it('leaves every other failure to the caller', () => {
    for (const code of ['23505', '22P02', '57014', '57P03', '53300', 'ECONNREFUSED', 'CONNECT_TIMEOUT'])
      expect(runAgain(failure(code), first)).toBe('no');
    expect(runAgain(new Error('no code'), first)).toBe('no');
    expect(runAgain(null, first)).toBe('no');
  });
});
