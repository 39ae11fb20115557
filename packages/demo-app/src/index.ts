export * from './orders.ts';
