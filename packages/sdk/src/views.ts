/** What the SDK's reads answer beside the protocol's own views: pages, timelines, deliveries, workers. */

export interface Page<T> {
  items: T[];
  /** Pass as `cursor` for the next page; null on the last one. */
  nextCursor: string | null;
}

/** One milestone of a task: created, ready, worker selected, retried, finished… */
export interface TimelineEntry {
  kind: string;
  message: string;
  data: Record<string, unknown>;
  executionId: string;
  at: string;
}

/** One callback TDP sent (or is sending) for a task, with its outcome. */
export interface CallbackDelivery {
  id: string;
  sequence: number;
  eventType: string;
  status: string;
  attempts: number;
  responseStatus: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export interface WorkflowTaskAdded {
  taskId: string;
  taskVersion: string;
  workflowVersion: string;
  created: boolean;
}

/** A worker session as `listWorkers` shows it (more fields than these: capabilities, labels, state…). */
export interface WorkerSummary {
  id: string;
  name: string;
  nodeId: string;
  [field: string]: unknown;
}
