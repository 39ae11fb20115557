/**
 * A `startWorker()` runtime as its own process with OpenTelemetry set up as `tdp worker` sets it up
 * (packages/cli/src/tracing.ts, from OTEL_EXPORTER_OTLP_*), running one capability, `trace.echo`, that
 * answers its input. Prints `{ "workerId": … }` once registered.
 *
 *   node --conditions=@tdp/source --import tsx test/tracedWorker.ts <baseUrl> <workerKey> <database> [rest|grpc]
 */
import { Type } from 'typebox';
import { startTracing } from '../packages/cli/src/tracing.ts';
import { defineCapability, silentLogger, startWorker } from '../packages/worker/src/index.ts';

const [url, key, database, transport = 'rest'] = process.argv.slice(2) as [string, string, string, string?];
const tracing = await startTracing(process.env, 'tdp-worker');
const echo = defineCapability({
  name: 'trace.echo',
  version: '1',
  input: Type.Object({ text: Type.String() }),
  output: Type.Object({ echoed: Type.String() }),
  run: async (_ctx, input) => ({ echoed: input.text }),
});
const worker = await startWorker({
  url,
  key,
  database,
  nodeId: 'node-traced',
  capabilities: [echo],
  handleSignals: false,
  transport: transport as 'rest' | 'grpc',
  logger: silentLogger,
});
process.stdout.write(`${JSON.stringify({ workerId: worker.id })}\n`);
process.on('SIGTERM', async () => {
  await worker.drain().catch(() => {});
  await tracing?.shutdown();
  process.exit(0);
});
