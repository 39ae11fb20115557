/**
 * The client-side deadline on every database answer. PostgreSQL's own `statement_timeout` ends a slow
 * statement, but not a connection whose network stopped passing bytes: there a statement, BEGIN, COMMIT
 * or ROLLBACK waits forever (the driver has no deadline; porsager/postgres #1186, #1195, #1199), and with
 * it the transaction, the loop round or the request that sent it. So each socket counts the requests it
 * sent that PostgreSQL still owes a ReadyForQuery for, and a socket that owes one and has received
 * nothing for `deadlineMs` is destroyed. The driver then fails every statement on it and drops the
 * connection from its pool (a new one is opened when needed); nothing is handed back half-answered.
 */
import type { Socket } from 'node:net';

/** The error the statements of a connection destroyed at its deadline fail with. */
export class DatabaseAnswerTimeout extends Error {
  readonly code = 'DATABASE_ANSWER_TIMEOUT';
  constructor(deadlineMs: number) {
    super(`the database sent no answer within ${deadlineMs} ms; the connection was destroyed`);
    this.name = 'DatabaseAnswerTimeout';
  }
}

const SYNC = 0x53; // 'S': ends an extended-protocol request
const QUERY = 0x51; // 'Q': a simple-protocol request
const READY_FOR_QUERY = 0x5a; // 'Z': the answer to either, and to the start-up message

/**
 * Splits a stream of protocol messages (a type byte, then a 4-byte length that counts itself) and
 * reports each message's type. The client's first message (start-up) has no type byte: reported as 0.
 */
class MessageFrames {
  private readonly header = Buffer.alloc(5);
  private headerBytes = 0;
  private bodyLeft = 0;

  constructor(
    private untypedFirst: boolean,
    private readonly onMessage: (type: number) => void,
  ) {}

  feed(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.bodyLeft > 0) {
        const skip = Math.min(this.bodyLeft, chunk.length - at);
        this.bodyLeft -= skip;
        at += skip;
        continue;
      }
      const headerSize = this.untypedFirst ? 4 : 5;
      const take = Math.min(headerSize - this.headerBytes, chunk.length - at);
      this.header.set(chunk.subarray(at, at + take), this.headerBytes);
      this.headerBytes += take;
      at += take;
      if (this.headerBytes < headerSize) return;
      const type = this.untypedFirst ? 0 : (this.header[0] as number);
      this.bodyLeft = this.header.readInt32BE(headerSize - 4) - 4;
      this.headerBytes = 0;
      this.untypedFirst = false;
      this.onMessage(type);
    }
  }
}

/**
 * Watches `socket` (a plain TCP connection to PostgreSQL, before the driver writes to it): call
 * `written` with every chunk the driver writes. Returns that function.
 */
export function answerDeadline(
  socket: Socket,
  deadlineMs: number,
  now: () => number = () => performance.now(),
): (chunk: unknown) => void {
  let owed = 0;
  let lastHeardAt = now();
  let timer: NodeJS.Timeout | null = null;

  const check = () => {
    timer = null;
    if (owed === 0 || socket.destroyed) return;
    const silentMs = now() - lastHeardAt;
    if (silentMs >= deadlineMs) socket.destroy(new DatabaseAnswerTimeout(deadlineMs));
    else arm(deadlineMs - silentMs);
  };
  const arm = (ms: number) => {
    timer = setTimeout(check, ms);
    timer.unref();
  };

  const sent = new MessageFrames(true, (type) => {
    if (type !== 0 && type !== SYNC && type !== QUERY) return;
    // The silence is measured from the oldest answer still owed.
    if (owed === 0) lastHeardAt = now();
    owed += 1;
    if (!timer) arm(deadlineMs);
  });
  const received = new MessageFrames(false, (type) => {
    if (type === READY_FOR_QUERY && owed > 0) owed -= 1;
  });
  let listening = false;
  socket.once('close', () => {
    if (timer) clearTimeout(timer);
    timer = null;
  });
  return (chunk) => {
    // Listening from the first write on: the driver reads the socket by then (a listener added
    // earlier would start the flow of data before the driver's own listener is there).
    if (!listening) {
      listening = true;
      socket.on('data', (data: Buffer) => {
        lastHeardAt = now();
        received.feed(data);
      });
    }
    if (chunk instanceof Uint8Array) sent.feed(chunk);
    else if (typeof chunk === 'string') sent.feed(Buffer.from(chunk));
  };
}
