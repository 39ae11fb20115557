// A worker of the consumer's own: one typed capability, run by @tdp/worker from compiled JavaScript.
import { defineCapability, startWorker } from '@tdp/worker';
import { Type } from 'typebox';

export const greet = defineCapability({
  name: 'consumer.greet',
  version: '1',
  input: Type.Object({ name: Type.String({ minLength: 1 }) }),
  output: Type.Object({ greeting: Type.String(), length: Type.Integer() }),
  async run(ctx, input) {
    ctx.progress(50, { phase: 'greeting' });
    const greeting = `Hello, ${input.name}!`;
    return { greeting, length: greeting.length };
  },
});

const worker = await startWorker({
  url: process.env.TDP_URL ?? 'http://127.0.0.1:8080',
  key: process.env.TDP_WORKER_KEY ?? '',
  capabilities: [greet],
  database: process.env.TDP_WORKER_DB ?? 'worker.db',
  healthPort: 0,
});
process.stdout.write(`${JSON.stringify({ ready: worker.id, health: worker.healthUrl })}\n`);
