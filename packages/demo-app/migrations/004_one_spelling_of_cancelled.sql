-- TDP spells cancelled one way now (CANCELLED, CANCELLING): the orders copied TDP's old words.
UPDATE demo.processing_order SET business_status = CASE business_status WHEN 'CANCELED' THEN 'CANCELLED' ELSE 'CANCELLING' END
  WHERE business_status IN ('CANCELED', 'CANCELING');

DROP INDEX demo.processing_order_open;
CREATE INDEX processing_order_open ON demo.processing_order (updated_at)
  WHERE business_status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED');
