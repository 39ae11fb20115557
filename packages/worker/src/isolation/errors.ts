/**
 * Errors across the process boundary: a CapabilityError keeps its code and options both ways. It is
 * recognised by its name and code, not by its class: a capability module may bring its own copy of the SDK.
 */
import { CapabilityError } from '../sdk.ts';
import type { SerializedError } from './messages.ts';

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const { code, options } = error as Partial<CapabilityError>;
  if (error.name === 'CapabilityError' && typeof code === 'string')
    return { name: error.name, message: error.message, code, ...(options ? { options } : {}) };
  return { name: error.name, message: error.message };
}

export function deserializeError(error: SerializedError): Error {
  if (error.name === 'CapabilityError' && error.code)
    return new CapabilityError(error.code, error.message, error.options ?? {});
  return Object.assign(new Error(error.message), { name: error.name });
}
