/** Records of running the work: requests for placement, commands to workers, timers, callbacks, milestones. */

export interface SchedulingRequestRecord {
  id: string;
  taskId: string;
  stepId: string;
  priority: number;
  availableAt: Date;
  createdAt: Date;
}

export interface WorkerCommandRecord {
  id: string;
  workerId: string;
  type: 'START_ATTEMPT' | 'CANCEL_ATTEMPT' | 'DRAIN';
  payload: Record<string, unknown>;
  createdAt: Date;
}

export interface TimerRecord {
  id: string;
  kind: 'RETRY_DUE' | 'SCHEDULE_TO_START' | 'START_TO_CLOSE' | 'HEARTBEAT_TIMEOUT' | 'CANCEL_GRACE';
  taskId: string;
  stepId: string | null;
  payload: Record<string, unknown>;
  availableAt: Date;
  createdAt: Date;
}

export interface CallbackRecord {
  id: string;
  applicationId: string;
  taskId: string;
  executionId: string;
  sequence: number;
  eventId: string;
  eventType: string;
  url: string;
  payload: Record<string, unknown>;
  createdAt: Date;
}

export interface TimelineRecord {
  id: string;
  taskId: string;
  executionId: string;
  kind: string;
  message: string;
  data: Record<string, unknown>;
  at: Date;
}
