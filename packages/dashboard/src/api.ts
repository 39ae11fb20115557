/**
 * The dashboard's calls to `/dashboard/api`: same-origin, the session cookie does the rest. A call that
 * changes something also sends the session's CSRF token, which the server hands the page at login and
 * on `/me` (another site's page can neither read it nor set the header).
 */
import { useEffect, useRef, useState } from 'react';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/**
 * Called when the session is missing or expired (the app shows the sign-in page), with the refusal's
 * body: it says whether single sign-on is set up (`ssoEnabled`).
 */
let onUnauthenticated = (_body: Record<string, unknown>) => {};
export const whenUnauthenticated = (handler: (body: Record<string, unknown>) => void) => {
  onUnauthenticated = handler;
};

/** The session's CSRF token, as the last login or `/me` answered it. */
let csrfToken = '';

export async function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const method = init.method ?? 'GET';
  const headers: Record<string, string> = {};
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(`/dashboard/api${path}`, {
    method,
    credentials: 'same-origin',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await response.text();
  const data = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  if (typeof data.csrfToken === 'string') csrfToken = data.csrfToken;
  if (!response.ok) {
    if (response.status === 401 && path !== '/login') onUnauthenticated(data);
    throw new ApiError(
      response.status,
      String(data.code ?? `HTTP_${response.status}`),
      String(data.detail ?? response.statusText),
    );
  }
  return data as T;
}

export type OperatorRole = 'viewer' | 'operator' | 'admin';
/** The roles from least to most: each allows what the one before it does, and more. */
export const operatorRoles: OperatorRole[] = ['viewer', 'operator', 'admin'];

export interface RoleBinding {
  role: OperatorRole;
  /** Null: platform-wide. */
  tenantId: string | null;
}

/** Who is signed in and what the pages offer them (the server refuses the rest anyway). */
export interface Me {
  /** `id` null: the bootstrap admin token. */
  operator: { id: string | null; displayName: string; email: string | null };
  roles: RoleBinding[];
  can: {
    /** Approvals, signals, corrections on tasks (operator role somewhere). */
    act: boolean;
    /** Drain, cordon, requeue dead letters (platform-wide operator). */
    actOnPlatform: boolean;
    /** The operators page (platform-wide admin). */
    admin: boolean;
    /** Workers and pipeline health (platform-wide viewer). */
    seePlatform: boolean;
  };
  /** Whether single sign-on is set up (the sign-in page after signing out offers it). */
  sso: { enabled: boolean };
}

export interface OperatorView {
  id: string;
  email: string;
  displayName: string;
  status: 'ACTIVE' | 'DISABLED';
  roles: (RoleBinding & { source: 'manual' | 'sso' })[];
  sso: boolean;
  hasPassword: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface AuditEntry {
  id: string;
  action: string;
  subjectId: string;
  /** The operator's display name at the time (or `bootstrap`). */
  actor: string;
  operatorId: string | null;
  sessionId: string | null;
  tenantId: string | null;
  taskId: string | null;
  reason: string | null;
  before: unknown;
  after: unknown;
  details: unknown;
  createdAt: string;
}

export type LifecycleStatus = 'PENDING' | 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';
export const lifecycleStatuses: LifecycleStatus[] = [
  'PENDING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
  'TIMED_OUT',
];

export interface TaskRow {
  id: string;
  tenantId: string;
  applicationId: string;
  applicationName?: string;
  workflowName: string | null;
  name: string;
  lifecycleStatus: LifecycleStatus;
  health: string;
  version: string;
  progress: number | null;
  /** `detail`: the technical side, for operators only (never shown to the person who submitted). */
  failure: { code: string; userMessage?: string | null; detail?: string | null } | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface TaskList {
  items: TaskRow[];
  counts: Record<LifecycleStatus, number>;
  applications: { id: string; name: string }[];
  workflows: string[];
}

export interface StepView {
  id: string;
  key: string;
  attempt: number;
  capability: string | null;
  capabilityVersion: string | null;
  status: string;
  progress: { percent?: number } | null;
  error: { code: string; userMessage?: string | null; detail?: string | null } | null;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  unschedulableReasons?: string[];
  /** While the step waits (approval, signal, sleep, …); approval steps say who can act. */
  waitingFor?: ({ kind: string } & Record<string, unknown>) | ApprovalWaiting | null;
}

export interface ApprovalWaiting {
  kind: 'approval';
  approvers: { users?: string[]; roles?: string[]; projects?: string[]; owner?: boolean };
  required: number;
  decisions: { decidedBy: string; decision: 'APPROVE' | 'REJECT'; comment?: string; decidedAt: string }[];
  since: string;
  timeoutAt?: string;
}

export interface TaskDetail {
  task: TaskRow & {
    externalRef: string | null;
    ownerId: string | null;
    currentExecutionId: string;
    totalDurationMs: number | null;
    /** A child task (started by a step of kind `task`): its parent. */
    parentTaskId?: string | null;
  };
  execution: {
    id: string;
    number: number;
    status: string;
    progress: number;
    steps: StepView[];
    /** What decides the next steps: TDP itself, or the Temporal workflow of this id (docs/temporal.md). */
    orchestration: { engine: 'native' | 'temporal'; workflowId: string | null };
  };
  dag: { key: string; dependsOn: string[]; capability: string | null; kind: string | null }[];
  attempts: {
    id: string;
    stepKey: string;
    attempt: number;
    workerName: string | null;
    nodeId: string | null;
    leaseVersion: number;
    status: string;
    createdAt: string;
    startedAt: string | null;
    finishedAt: string | null;
    revokedAt: string | null;
  }[];
  timeline: { kind: string; message: string; data?: Record<string, unknown> | null; at: string }[];
  callbacks: {
    id: string;
    sequence: number;
    eventType: string;
    status: string;
    attempts: number;
    responseStatus: number | null;
    lastError: string | null;
    deliveredAt: string | null;
  }[];
}

/**
 * Reads `path` now and every `intervalMs` while mounted; the last good answer stays on a failed read.
 * `reload` reads it again now (after an action changed it).
 */
export function usePolled<T>(
  path: string,
  intervalMs: number,
): { data: T | null; error: string | null; reload: () => void } {
  const [state, setState] = useState<{ data: T | null; error: string | null }>({ data: null, error: null });
  const reload = useRef<() => void>(() => {});
  useEffect(() => {
    let stopped = false;
    const load = () =>
      api<T>(path).then(
        (data) => {
          if (!stopped) setState({ data, error: null });
        },
        (error: Error) => {
          if (!stopped) setState((previous) => ({ data: previous.data, error: error.message }));
        },
      );
    reload.current = () => void load();
    void load();
    const timer = setInterval(load, intervalMs);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [path, intervalMs]);
  return { ...state, reload: () => reload.current() };
}
