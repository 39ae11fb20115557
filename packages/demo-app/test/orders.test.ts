import { describe, expect, it } from 'vitest';
import {
  type AssetFacts,
  applyCallback,
  type OrderProjection,
  reconcileOrder,
  validateOrder,
} from '../src/orders.ts';

const ready: AssetFacts = { kind: 'SOURCE_ZIP', state: 'READY' };
const codes = (result: ReturnType<typeof validateOrder>) =>
  result.ok ? [] : result.errors.map((e) => e.code);

describe('validating an order', () => {
  it('accepts both modes, trimming the name and the watermark, counting characters not bytes', () => {
    const watermarked = validateOrder(
      {
        name: '  Holiday  ',
        sourceAssetId: 'a1',
        processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
        watermarkText: ' 机密 Confidential ',
      },
      ready,
    );
    expect(watermarked).toMatchObject({
      ok: true,
      order: { name: 'Holiday', watermarkText: '机密 Confidential' },
    });
    // 100 CJK characters are 300 bytes: still within the limit.
    expect(
      validateOrder(
        {
          name: '名'.repeat(200),
          sourceAssetId: 'a1',
          processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
          watermarkText: '密'.repeat(100),
        },
        ready,
      ).ok,
    ).toBe(true);
    const clean = validateOrder(
      { name: 'x', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY', watermarkText: '   ' },
      ready,
    );
    expect(clean).toMatchObject({ ok: true, order: { watermarkText: null } });
  });

  it('refuses each rule with its own code, all at once', () => {
    expect(
      codes(validateOrder({ name: '   ', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY' }, ready)),
    ).toEqual(['NAME_INVALID']);
    expect(
      codes(
        validateOrder(
          { name: 'n'.repeat(201), sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY' },
          ready,
        ),
      ),
    ).toEqual(['NAME_INVALID']);
    expect(
      codes(validateOrder({ name: 'n', sourceAssetId: 'a1', processingMode: 'WATERMARK_ONLY' }, ready)),
    ).toEqual(['PROCESSING_MODE_INVALID']);
    expect(
      codes(
        validateOrder(
          { name: 'n', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK' },
          ready,
        ),
      ),
    ).toEqual(['WATERMARK_INVALID']);
    expect(
      codes(
        validateOrder(
          {
            name: 'n',
            sourceAssetId: 'a1',
            processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
            watermarkText: 'w'.repeat(101),
          },
          ready,
        ),
      ),
    ).toEqual(['WATERMARK_INVALID']);
    expect(
      codes(
        validateOrder(
          { name: 'n', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY', watermarkText: 'nope' },
          ready,
        ),
      ),
    ).toEqual(['WATERMARK_NOT_ALLOWED']);
    expect(
      codes(
        validateOrder(
          { name: 'n', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY' },
          { kind: 'SOURCE_ZIP', state: 'UPLOADING' },
        ),
      ),
    ).toEqual(['SOURCE_NOT_READY']);
    expect(
      codes(
        validateOrder(
          { name: 'n', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY' },
          { kind: 'OUTPUT', state: 'READY' },
        ),
      ),
    ).toEqual(['SOURCE_NOT_READY']);
    expect(codes(validateOrder({}, null))).toEqual([
      'NAME_INVALID',
      'PROCESSING_MODE_INVALID',
      'SOURCE_NOT_READY',
    ]);
  });

  it('fingerprints the request so a replayed key can tell the same request from another', () => {
    const one = validateOrder(
      { name: 'n', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY' },
      ready,
    );
    const same = validateOrder(
      { name: ' n ', sourceAssetId: 'a1', processingMode: 'ARCHIVE_CLEAN_ONLY', watermarkText: '' },
      ready,
    );
    const other = validateOrder(
      { name: 'n', sourceAssetId: 'a2', processingMode: 'ARCHIVE_CLEAN_ONLY' },
      ready,
    );
    expect(one.ok && same.ok && one.order.requestHash === same.order.requestHash).toBe(true);
    expect(one.ok && other.ok && one.order.requestHash !== other.order.requestHash).toBe(true);
  });
});

describe('applying callbacks to an order', () => {
  const submitting: OrderProjection = {
    status: 'SUBMITTING',
    progress: 0,
    executionId: null,
    pastExecutionIds: [],
    lastSequence: 0,
  };
  const apply = (
    order: OrderProjection,
    executionId: string,
    sequence: number,
    status: string,
    progress: number | null = null,
  ) => applyCallback(order, { executionId, sequence, status, progress });
  const applied = (outcome: ReturnType<typeof applyCallback>) => {
    if (outcome.kind !== 'applied') throw new Error(`expected applied, got ${outcome.kind}`);
    return outcome;
  };

  it('follows an execution forward: SUBMITTING → SUBMITTED → RUNNING → SUCCEEDED with progress 100', () => {
    let order = applied(apply(submitting, 'e1', 1, 'CREATED')).order;
    expect(order).toMatchObject({ status: 'SUBMITTED', executionId: 'e1', lastSequence: 1 });
    order = applied(apply(order, 'e1', 2, 'RUNNING', 40)).order;
    order = applied(apply(order, 'e1', 3, 'SUCCEEDED', 90)).order;
    expect(order).toMatchObject({ status: 'SUCCEEDED', progress: 100, lastSequence: 3 });
  });

  it('never moves back: an older or repeated sequence changes nothing; a finished order stays finished', () => {
    let order = applied(apply(submitting, 'e1', 1, 'CREATED')).order;
    order = applied(apply(order, 'e1', 3, 'SUCCEEDED')).order;
    expect(apply(order, 'e1', 2, 'RUNNING', 50)).toEqual({ kind: 'not-newer' });
    expect(apply(order, 'e1', 3, 'SUCCEEDED')).toEqual({ kind: 'not-newer' });
    const later = applied(apply(order, 'e1', 4, 'RUNNING', 10)).order;
    expect(later).toMatchObject({ status: 'SUCCEEDED', progress: 100 });
  });

  it('reports a gap in the sequence but still applies the newer state', () => {
    const first = applied(apply(submitting, 'e1', 1, 'CREATED'));
    expect(first.gap).toBe(false);
    const jumped = applied(apply(first.order, 'e1', 4, 'RUNNING', 30));
    expect(jumped.gap).toBe(true);
    expect(jumped.order).toMatchObject({ status: 'RUNNING', progress: 30, lastSequence: 4 });
  });

  it('adopts a new execution (a retry) and ignores late results of the older one', () => {
    let order = applied(apply(submitting, 'e1', 1, 'CREATED')).order;
    order = applied(apply(order, 'e1', 2, 'FAILED')).order;
    order = applied(apply(order, 'e2', 1, 'RUNNING', 5)).order;
    expect(order).toMatchObject({
      status: 'RUNNING',
      executionId: 'e2',
      pastExecutionIds: ['e1'],
      progress: 5,
    });
    expect(apply(order, 'e1', 3, 'SUCCEEDED')).toEqual({ kind: 'older-execution' });
    expect(apply(order, 'e2', 2, 'BOGUS')).toEqual({ kind: 'unknown-status' });
  });
});

describe('reconciling an order with what TDP says', () => {
  const running: OrderProjection = {
    status: 'RUNNING',
    progress: 40,
    executionId: 'e1',
    pastExecutionIds: [],
    lastSequence: 3,
  };

  it('moves forward to the execution’s status and keeps the callback sequence', () => {
    expect(reconcileOrder(running, { executionId: 'e1', status: 'SUCCEEDED', progress: 100 })).toEqual({
      ...running,
      status: 'SUCCEEDED',
      progress: 100,
    });
  });

  it('never moves back, and returns nothing when nothing changes', () => {
    expect(reconcileOrder(running, { executionId: 'e1', status: 'QUEUED', progress: 0 })).toBeNull();
    expect(reconcileOrder(running, { executionId: 'e1', status: 'RUNNING', progress: 40 })).toBeNull();
    const done = { ...running, status: 'SUCCEEDED' as const, progress: 100 };
    expect(reconcileOrder(done, { executionId: 'e1', status: 'FAILED', progress: 100 })).toBeNull();
  });

  it('adopts a newer execution (a retry) and ignores one the order has moved past', () => {
    expect(reconcileOrder(running, { executionId: 'e2', status: 'QUEUED', progress: 0 })).toEqual({
      status: 'SUBMITTED',
      progress: 0,
      executionId: 'e2',
      pastExecutionIds: ['e1'],
      lastSequence: 0,
    });
    const moved = { ...running, executionId: 'e2', pastExecutionIds: ['e1'] };
    expect(reconcileOrder(moved, { executionId: 'e1', status: 'SUCCEEDED', progress: 100 })).toBeNull();
  });
});
