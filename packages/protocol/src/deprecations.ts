/**
 * Words the wire spoke before and the words it speaks now (docs/architecture.md, "Wire versions and
 * deprecations"): the server reads the old ones on input, the SDK reads a callback of spec 1.0 with them.
 */
export const renamedStatuses: Readonly<Record<string, string>> = {
  CANCELED: 'CANCELLED',
  CANCELING: 'CANCELLING',
};

/** Callback event types of spec 1.0 that spec 1.1 renamed. */
export const renamedCallbackTypes: Readonly<Record<string, string>> = {
  'execution.canceled': 'execution.cancelled',
  'execution.canceling': 'execution.cancelling',
};
