-- The bridge's claim of each invocation's run (contract 7.1): its id and
-- fencing number once this coordinator holds it (0 while not claimed), so
-- that the run's writes — reply, receipts, presence — carry the fence, and
-- a restarted coordinator finishes the claim it held.
ALTER TABLE invocations ADD COLUMN claim_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN claim_fence INTEGER NOT NULL DEFAULT 0;
