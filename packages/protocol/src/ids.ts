import { v7 } from 'uuid';

/** A new time-ordered identifier (UUIDv7): ids sort by creation time, which keeps indexes compact. */
export function newId(): string {
  return v7();
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return uuidPattern.test(value);
}
