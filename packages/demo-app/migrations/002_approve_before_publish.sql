-- "Approve before the result is published": such an order's task waits for its owner's
-- approval after processing; the app publishes the result itself once TDP reports the task SUCCEEDED,
-- and a rejection ends the order REJECTED.
ALTER TABLE demo.processing_order
  ADD COLUMN approve_before_publish boolean NOT NULL DEFAULT false,
  ADD COLUMN published_at timestamptz;

DROP INDEX demo.processing_order_open;
CREATE INDEX processing_order_open ON demo.processing_order (updated_at)
  WHERE business_status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELED', 'REJECTED');
