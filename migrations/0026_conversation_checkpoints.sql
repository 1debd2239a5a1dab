-- Simulated conversations resume where they stopped (docs/agents.md).
--
-- An experiment run with a simulated user is several agent turns and simulator calls. After
-- each simulator reply that goes on, the run attempt writes the conversation so far (its
-- turns, the next user message, the figures summed so far) as the run's checkpoint, by the
-- attempt that runs it only. An attempt that finds a checkpoint (the process died, or the
-- run was handed back) goes on from it: no turn of it is sent twice.

ALTER TABLE experiment_runs ADD COLUMN checkpoint jsonb;
