/**
 * The NATS server the tests use (scripts/services.sh starts one with JetStream on 127.0.0.1:4222;
 * NATS_URL wins). Without it a test skips, except under CI, where it fails.
 */
import { connect } from 'nats';

export const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

async function natsAnswers(): Promise<boolean> {
  try {
    const probe = await connect({ servers: natsUrl, timeout: 2_000, reconnect: false });
    await probe.close();
    return true;
  } catch {
    return false;
  }
}

/** Whether NATS answers (false: skip); under CI a silent one throws (the test file fails). */
export async function requireNats(): Promise<boolean> {
  const answers = await natsAnswers();
  if (!answers && process.env.CI) throw new Error(`NATS is required under CI but ${natsUrl} does not answer`);
  return answers;
}
