/**
 * Messages for people (docs/errors.md): a failure's `userMessage` is a short sentence for the person who
 * submitted the work — what failed and what to do — never an internal URL, a JSON body, a stack or
 * another service's raw answer. The technical text goes to the error's `detail` and to the logs.
 * Workers and the server build their messages here, and the server checks every message it stores.
 */

/** A `userMessage` is cut to this many characters (at a word, with an ellipsis). */
export const userMessageMaxLength = 300;
/** A `detail` (for developers and operators, never shown to people) is cut to this many characters. */
export const errorDetailMaxLength = 2000;

const unfitPatterns: [pattern: RegExp, what: string][] = [
  [/[{}]/, 'a JSON body'],
  [/\burn:/i, 'an internal URN'],
  [/(^|[\s"'(])\/(v\d+|admin|api)\//i, 'an internal API path'],
  [/\bHTTP\/\d(\.\d)?\b/i, 'an HTTP status line'],
  [
    /\b(answered|returned|responded|replied|status(\s+code)?)\s*(with\s+)?:?\s*[1-5]\d\d\b/i,
    'an HTTP status',
  ],
  [/^\s*[1-5]\d\d\s+[A-Z]/, 'an HTTP status line'],
  [/\n\s*at\s|\bat\s+\S+\s+\([^)]*:\d+:\d+\)/, 'a stack trace'],
  [/\b[a-z][a-z0-9+.-]*:\/\/\S/i, 'a URL'],
];

/** What makes `text` unfit to show a person (a JSON body, an internal path…), or null if it is fine. */
export function unfitForPeople(text: string): string | null {
  for (const [pattern, what] of unfitPatterns) if (pattern.test(text)) return what;
  return null;
}

/** `text` cut to `max` characters at a word boundary, with an ellipsis when it was cut. */
export function clampText(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s.,;:]+$/, '')}…`;
}

/** What a failure with this code means for the person who submitted the work, and what they can do. */
const sentences: Record<string, string> = {
  RESOURCE_PROVIDER_NOT_CONFIGURED:
    'The application has no file storage connected to TDP, so this step could not read or write its files. Ask the application’s administrator to set one up, then retry.',
  RESOURCE_PROVIDER_REFUSED:
    'The application’s storage refused access to a file this step needs. Check that the file exists and belongs to this work, then retry.',
  RESOURCE_PROVIDER_FAILED:
    'The application’s storage could not be reached. Retry in a few minutes; if it keeps failing, contact the application’s support.',
  RESOURCE_PROVIDER_INVALID:
    'The application’s storage gave an answer TDP cannot use. Contact the application’s support.',
  GRANT_UNAVAILABLE: 'TDP could not be reached to get access to a file. Retry in a few minutes.',
  GRANT_REFUSED: 'Access to a file this step needs was refused. Check the file, then retry.',
  STALE_EXECUTION: 'This step was moved to another worker; it continues there.',
  ATTEMPT_NOT_FOUND: 'This step was moved to another worker; it continues there.',
  LEASE_LOST: 'This step was moved to another worker; it continues there.',
  DOWNLOAD_FAILED: 'An input file could not be downloaded. Check that it still exists, then retry.',
  UPLOAD_FAILED: 'The result could not be saved to the application’s storage. Retry in a few minutes.',
  OUTPUT_TOO_LARGE: 'The result is larger than the application’s storage accepts.',
  DOWNLOAD_TOO_LARGE: 'An input file is larger than this worker accepts. Contact the application’s support.',
  EGRESS_REFUSED:
    'A file of this step is at an address TDP does not connect to. Contact the application’s support.',
  CAPABILITY_CRASHED: 'The step failed unexpectedly. Retry; if it fails again, contact support.',
  CAPABILITY_NOT_FOUND: 'No worker can run this step. Contact support.',
};

/** The sentence for a failure code, or a general one naming the code. */
export function failureSentence(code: string): string {
  return Object.hasOwn(sentences, code)
    ? sentences[code]!
    : `The step failed (${code.replace(/[^A-Z0-9_]/gi, '').slice(0, 64) || 'error'}). Retry; if it fails again, contact support.`;
}

/**
 * The message to show a person for a failure: `message` when it is fit for people (cut to length),
 * else the sentence for `code`. `detail` is what to keep for developers: the unfit message, if any.
 */
export function messageForPeople(
  code: string,
  message: string | null | undefined,
): { userMessage: string; detail: string | null } {
  const text = message?.trim() ?? '';
  if (text && !unfitForPeople(text))
    return { userMessage: clampText(text, userMessageMaxLength), detail: null };
  return {
    userMessage: failureSentence(code),
    detail: text ? clampText(text, errorDetailMaxLength) : null,
  };
}
