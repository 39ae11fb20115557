/**
 * The one isolation rule for what a user is shown through an application's tokens (user tokens,
 * realtime connection and subscription tokens, the task stream): the tasks of that application, or —
 * when the tenant gave the application the TENANT user view — of every application of the tenant;
 * never another tenant's. Within that reach the task's owner and ACL decide, as everywhere.
 */
import type { UserView } from './ports.ts';

export interface UserReach {
  tenantId: string;
  applicationId: string;
  userView: UserView;
}

/** Whether a task of `task`'s tenant and application is within the reach (before its ACL). */
export function withinReach(reach: UserReach, task: { tenantId: string; applicationId: string }): boolean {
  return (
    task.tenantId === reach.tenantId &&
    (reach.userView === 'TENANT' || task.applicationId === reach.applicationId)
  );
}

/** The applications whose tasks the reach covers, given every application of its tenant (in order). */
export function reachedApplications(reach: UserReach, tenantApplicationIds: string[]): string[] {
  return reach.userView === 'TENANT' ? [...tenantApplicationIds].sort() : [reach.applicationId];
}
