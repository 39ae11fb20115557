/** Which host of a multi-host DATABASE_URL a new connection goes to (pure; the drills run real servers). */
import { describe, expect, it } from 'vitest';
import { DatabaseHostChoice, databaseHosts } from '../src/adapters/outbound/postgres/databaseHosts.ts';

describe('databaseHosts', () => {
  it('reads one host, several, default ports and bracketed IPv6', () => {
    expect(databaseHosts('postgres://u:p@db:6543/tdp')).toEqual([{ host: 'db', port: 6543 }]);
    expect(databaseHosts('postgres://u:p%40x@a:5433,b,[::1]:5434/tdp?target_session_attrs=any')).toEqual([
      { host: 'a', port: 5433 },
      { host: 'b', port: 5432 },
      { host: '::1', port: 5434 },
    ]);
    expect(databaseHosts('postgresql://127.0.0.1/tdp')).toEqual([{ host: '127.0.0.1', port: 5432 }]);
  });
});

describe('DatabaseHostChoice', () => {
  const hosts = [
    { host: 'a', port: 5432 },
    { host: 'b', port: 5432 },
  ];

  it('takes each host in turn until one takes writes, then keeps to it', () => {
    let now = 0;
    const choice = new DatabaseHostChoice(hosts, () => now);
    expect(choice.pick().index).toBe(0);
    choice.report(0, 'read-only');
    expect(choice.pick().index).toBe(1);
    choice.report(1, 'writable');
    now += 10;
    expect([choice.pick().index, choice.pick().index]).toEqual([1, 1]);
    expect(choice.unwritable()).toBeNull();
  });

  it('follows a promotion: the primary fails, the standby is tried again after a pause and taken', () => {
    let now = 0;
    const choice = new DatabaseHostChoice(hosts, () => now);
    choice.report(1, 'read-only');
    choice.report(0, 'writable');
    now = 1_000;
    choice.report(0, 'unreachable');
    const next = choice.pick();
    expect(next.index).toBe(1);
    expect(next.waitMs).toBe(0); // its read-only answer is long past
    choice.report(1, 'read-only'); // not promoted yet
    const again = choice.pick();
    expect(again.index).toBe(0);
    expect(again.waitMs).toBe(250); // it failed just now: a pause, not a spin
    now += 300;
    choice.report(0, 'unreachable');
    expect(choice.unwritable()).toBe('no database host takes writes: a:5432 unreachable, b:5432 read-only');
    expect(choice.pick()).toMatchObject({ index: 1, waitMs: 0 });
    choice.report(1, 'writable'); // promoted
    expect(choice.pick().index).toBe(1);
    expect(choice.unwritable()).toBeNull();
  });

  it('says when every host is a standby', () => {
    const choice = new DatabaseHostChoice(hosts, () => 0);
    expect(choice.unwritable()).toBeNull(); // not every host tried yet
    choice.report(0, 'read-only');
    choice.report(1, 'read-only');
    expect(choice.unwritable()).toBe('every database host is read-only (a standby): a:5432, b:5432');
  });
});
