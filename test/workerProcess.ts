/**
 * The test worker as its own process, so a test can kill it with SIGKILL mid-attempt. It reports
 * STEP_STARTED for every attempt and never finishes one; it prints one JSON line when registered
 * (`{ workerId }`) and one per attempt started (`{ started: command }`).
 *
 *   node --conditions=@tdp/source --import tsx test/workerProcess.ts <baseUrl> <workerKey> <nodeId> <capability>
 */
import { attemptEvent, startTestWorker } from './testWorker.ts';

const [baseUrl, workerKey, nodeId, capability] = process.argv.slice(2) as [string, string, string, string];

const worker = await startTestWorker({
  baseUrl,
  workerKey,
  nodeId,
  capabilities: [{ name: capability, version: '1' }],
  handler: async (command, report) => {
    await report([attemptEvent(command, 'STEP_STARTED', 1)]);
    process.stdout.write(`${JSON.stringify({ started: command })}\n`);
  },
});
process.stdout.write(`${JSON.stringify({ workerId: worker.workerId })}\n`);
