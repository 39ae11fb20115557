/**
 * A password for `--password-stdin`: never an argument (it would land in the shell's history and in
 * `ps`). From a pipe, all of stdin less one final newline; from a terminal, one line typed unseen.
 */

export async function readPassword(
  stdin: NodeJS.ReadStream | NodeJS.ReadableStream,
  prompt: NodeJS.WritableStream,
): Promise<string> {
  const terminal = stdin as NodeJS.ReadStream;
  if (terminal.isTTY && typeof terminal.setRawMode === 'function') return readUnseen(terminal, prompt);
  let text = '';
  for await (const chunk of stdin) text += chunk.toString();
  return text.replace(/\r?\n$/, '');
}

/** Raw mode: no echo; Enter ends the line, Backspace takes a character back, Ctrl-C or Ctrl-D gives up (''). */
function readUnseen(terminal: NodeJS.ReadStream, prompt: NodeJS.WritableStream): Promise<string> {
  prompt.write('Password: ');
  terminal.setRawMode(true);
  terminal.resume();
  return new Promise((resolve) => {
    let typed = '';
    const finish = (password: string) => {
      terminal.off('data', onData);
      terminal.setRawMode(false);
      terminal.pause();
      prompt.write('\n');
      resolve(password);
    };
    const onData = (chunk: Buffer) => {
      for (const character of chunk.toString('utf8')) {
        if (character === '\r' || character === '\n') return finish(typed);
        if (character === '\u0003' || character === '\u0004') return finish('');
        if (character === '\u007f' || character === '\b') typed = [...typed].slice(0, -1).join('');
        else typed += character;
      }
    };
    terminal.on('data', onData);
  });
}
