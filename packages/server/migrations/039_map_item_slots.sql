-- Map steps hold concurrency key slots per item: each item's attempt holds one slot of each of the
-- map's pools while it runs, and gives it back when it ends. A step's own attempt keeps -1.
ALTER TABLE concurrency_hold ADD COLUMN item_index integer NOT NULL DEFAULT -1;
ALTER TABLE concurrency_hold DROP CONSTRAINT concurrency_hold_pkey;
ALTER TABLE concurrency_hold ADD PRIMARY KEY (step_id, item_index, name);

