export * from './errors.ts';
export * from './grants.ts';
export * from './ids.ts';
export * from './messages.ts';
export * from './schemas.ts';
export * from './signing.ts';
export * from './status.ts';
export * from './worker.ts';
