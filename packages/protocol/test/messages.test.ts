/** The message builder for people (docs/errors.md): what passes, what is replaced, and the length limit. */
import { describe, expect, it } from 'vitest';
import {
  clampText,
  failureSentence,
  messageForPeople,
  unfitForPeople,
  userMessageMaxLength,
} from '../src/index.ts';

const rawGrantAnswer =
  'POST /v1/attempts/0190a/grants answered 409: {"type":"urn:tdp:error:RESOURCE_PROVIDER_NOT_CONFIGURED","status":409}';

describe('unfitForPeople', () => {
  it.each([
    [rawGrantAnswer, 'a JSON body'],
    ['see urn:tdp:error:STALE_EXECUTION', 'an internal URN'],
    ['POST /v1/tasks failed', 'an internal API path'],
    ['HTTP/1.1 502 Bad Gateway', 'an HTTP status line'],
    ['the provider answered 403', 'an HTTP status'],
    ['upload returned status 500', 'an HTTP status'],
    ['404 Not Found', 'an HTTP status line'],
    ['TypeError: x is undefined\n    at run (/app/src/a.ts:10:5)', 'a stack trace'],
    ['failed at fetchGrant (file:///app/client.js:12:7)', 'a stack trace'],
    ['could not read https://storage.internal/bucket/a.zip', 'a URL'],
  ])('%s → %s', (text, why) => {
    expect(unfitForPeople(text)).toBe(why);
  });

  it.each([
    'The ZIP is damaged: it ends before its table of contents. Upload it again.',
    'Watermark text is too long (at most 200 characters).',
    'Step only timed out: no heartbeat for 60000 ms',
    'Page 3 of 12 could not be read.',
  ])('lets a sentence for people through: %s', (text) => {
    expect(unfitForPeople(text)).toBeNull();
  });
});

describe('messageForPeople', () => {
  it('replaces an internal answer with the sentence for its code and keeps the answer as detail', () => {
    expect(messageForPeople('RESOURCE_PROVIDER_NOT_CONFIGURED', rawGrantAnswer)).toEqual({
      userMessage: failureSentence('RESOURCE_PROVIDER_NOT_CONFIGURED'),
      detail: rawGrantAnswer,
    });
  });

  it('keeps a message fit for people, cut to the limit at a word', () => {
    const long = `${'The archive could not be opened because '.repeat(20)}end.`;
    const { userMessage, detail } = messageForPeople('ZIP_DAMAGED', long);
    expect(detail).toBeNull();
    expect(userMessage.length).toBeLessThanOrEqual(userMessageMaxLength);
    expect(userMessage).toMatch(/because…$|opened…$|could…$|be…$|not…$|The…$|archive…$/);
  });

  it('gives every code a sentence: a known one its own, any other a general one naming the code', () => {
    expect(failureSentence('STALE_EXECUTION')).toBe(
      'This step was moved to another worker; it continues there.',
    );
    expect(failureSentence('MY_CODE')).toBe(
      'The step failed (MY_CODE). Retry; if it fails again, contact support.',
    );
    expect(unfitForPeople(failureSentence('{"x":1}'))).toBeNull();
    expect(failureSentence('constructor')).toBe(
      'The step failed (constructor). Retry; if it fails again, contact support.',
    );
    expect(messageForPeople('X', '   ')).toEqual({ userMessage: failureSentence('X'), detail: null });
  });

  it('clampText flattens white space and leaves short text alone', () => {
    expect(clampText('  two\n  lines ', 50)).toBe('two lines');
    expect(clampText('abcdefghij', 5)).toBe('abcd…');
  });
});
