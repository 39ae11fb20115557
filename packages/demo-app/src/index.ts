export * from './main.ts';
export * from './orders.ts';
export * from './setup.ts';
