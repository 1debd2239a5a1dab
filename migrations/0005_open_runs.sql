-- The open (pending or running) runs of an evaluation in plan order: the step machine
-- reads the first few after every finished run, and eval::status the first running one.
-- Without it both walk every finished run of the evaluation, so a run's cost grew with
-- the size of its evaluation.
CREATE INDEX runs_open ON runs (evaluation_id, position) WHERE status IN ('pending', 'running');
