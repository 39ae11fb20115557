/** Who may decide on an approval step, what the decisions add up to, and whom the notice reaches (pure). */
import type { ApprovalOptions } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import type { AclEntry, TaskState } from '../src/core/facts/records.ts';
import {
  approverChannels,
  approverGrants,
  canSee,
  mayDecide,
  tally,
} from '../src/core/orchestration/kinds/approvalRules.ts';

const task = { tenantId: 't', applicationId: 'a', ownerId: 'olga' } as TaskState['task'];
const state = { task } as TaskState;
const user = (userId: string, roles: string[] = [], projects: string[] = []) => ({
  kind: 'user' as const,
  userId,
  roles,
  projects,
});
const acl: AclEntry[] = [
  { principalType: 'USER', principalId: 'rita', permission: 'VIEW' },
  { principalType: 'ROLE', principalId: 'reviewer', permission: 'VIEW' },
];

describe('who may decide', () => {
  const options: ApprovalOptions = {
    approvers: { users: ['rita', 'olga'], roles: ['reviewer'], projects: ['p1'] },
  };
  it.each([
    ['a listed user', user('rita'), null],
    ['through a listed role', user('rex', ['reviewer']), null],
    ['through a listed project', user('pia', [], ['p1']), null],
    ['someone unlisted', user('mallory', ['viewer']), 'NOT_AN_APPROVER'],
    ['the submitter, listed, without allowSubmitter', user('olga'), 'NOT_AN_APPROVER'],
    [
      'the operator',
      {
        kind: 'operator' as const,
        reason: 'by phone',
        actor: { operatorId: null, name: 'Ada', credentialId: null },
      },
      null,
    ],
  ])('%s', (_name, decider, code) => {
    expect(mayDecide(options, task, decider)?.code ?? null).toBe(code);
  });
  it('the submitter with allowSubmitter, or as the owner when the owner decides', () => {
    expect(mayDecide({ ...options, allowSubmitter: true }, task, user('olga'))).toBeNull();
    expect(mayDecide({ approvers: { owner: true } }, task, user('olga'))).toBeNull();
    expect(mayDecide({ approvers: { owner: true } }, task, user('rita'))?.code).toBe('NOT_AN_APPROVER');
  });
  it('sees the task as its owner or through its ACL only', () => {
    expect(
      [user('olga'), user('rita'), user('rex', ['reviewer']), user('eve', [], ['p1'])].map((d) =>
        canSee(task, acl, d),
      ),
    ).toEqual([true, true, true, false]);
  });
});

describe('the decisions', () => {
  const approve = (decidedBy: string) => ({ decidedBy, decision: 'APPROVE' as const });
  it('approve at `required`, reject at the first rejection, and the operator settles alone', () => {
    expect(tally(2, [approve('user:a')])).toBe('PENDING');
    expect(tally(2, [approve('user:a'), approve('user:b')])).toBe('APPROVED');
    expect(tally(2, [approve('user:a'), { decidedBy: 'user:b', decision: 'REJECT' }])).toBe('REJECTED');
    expect(tally(3, [approve('operator')])).toBe('APPROVED');
    expect(tally(1, [])).toBe('PENDING');
  });
});

describe('the action notice', () => {
  it("reaches the approvers' channels among those that see the task, each once, never the excluded submitter", () => {
    const channels = approverChannels(
      { approvers: { users: ['rita', 'olga', 'stranger'], roles: ['reviewer', 'unseen'] } },
      state,
      acl,
    );
    expect(channels.sort()).toEqual(['task_role:t/a/reviewer', 'task_user:t/a/rita']);
    expect(approverChannels({ approvers: { owner: true } }, state, acl)).toEqual(['task_user:t/a/olga']);
  });
});

describe('who is given access when the approval begins', () => {
  const options: ApprovalOptions = {
    approvers: {
      users: ['rita', 'olga', 'rex'],
      roles: ['reviewer', 'legal'],
      projects: ['p1'],
      owner: true,
    },
  };
  it('grants VIEW to each named approver the owner and the ACL do not reach, each once', () => {
    const operate: AclEntry = { principalType: 'USER', principalId: 'rex', permission: 'OPERATE' };
    expect(approverGrants(options, task, [...acl, operate])).toEqual([
      { principalType: 'ROLE', principalId: 'legal', permission: 'VIEW' },
      { principalType: 'PROJECT', principalId: 'p1', permission: 'VIEW' },
    ]);
  });
  it('names nobody twice and grants nothing when everyone sees the task already', () => {
    const twice: ApprovalOptions = { approvers: { users: ['rita', 'rita'], roles: ['reviewer'] } };
    expect(approverGrants(twice, task, [])).toEqual([
      { principalType: 'USER', principalId: 'rita', permission: 'VIEW' },
      { principalType: 'ROLE', principalId: 'reviewer', permission: 'VIEW' },
    ]);
    expect(approverGrants(twice, task, acl)).toEqual([]);
  });
});
