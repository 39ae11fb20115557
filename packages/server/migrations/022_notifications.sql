-- Offline notifications (docs/notifications.md): a terminal failure or an action-required notice is also
-- kept per user as an unread record, written in the transaction of its fact. The unique key makes a
-- second write of the same notice (a retried or replayed fact) a no-op, so nobody is told twice.
-- The record is also a delivery row of the shared claim mechanism (outboxQueue.ts): when a webhook is
-- configured, each one is POSTed there, retried with back-off, DEAD after the limit.
CREATE TABLE user_notification (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL,
  application_id     uuid NOT NULL,
  user_id            text NOT NULL,
  task_id            uuid NOT NULL,
  task_version       bigint NOT NULL,
  notification_type  text NOT NULL,
  severity           text NOT NULL,
  message            text NOT NULL,
  requires_action    boolean NOT NULL,
  read_at            timestamptz,
  status             text NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED', 'DEAD')),
  attempts           integer NOT NULL DEFAULT 0,
  available_at       timestamptz NOT NULL,
  claim_id           uuid,
  claim_expires_at   timestamptz,
  last_error         text,
  created_at         timestamptz NOT NULL,
  published_at       timestamptz,
  CONSTRAINT user_notification_once UNIQUE (user_id, task_id, task_version, notification_type)
);
-- A user's list: unread first, then newest.
CREATE INDEX user_notification_inbox
  ON user_notification (tenant_id, user_id, (read_at IS NULL) DESC, created_at DESC, id DESC);
CREATE INDEX user_notification_due ON user_notification (available_at) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX user_notification_claimed ON user_notification (claim_expires_at) WHERE status = 'PUBLISHING';
