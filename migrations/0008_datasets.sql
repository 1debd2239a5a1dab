-- Datasets of test cases for experiments (docs/experiments.md). A dataset is immutable:
-- its cases are written once, in one transaction with the dataset row, and never updated.
-- The same name with the same cases is the same dataset (UNIQUE (name, sha256)), which
-- makes an upload idempotent; another name with the same cases is another dataset.
CREATE TABLE datasets (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    sha256      text NOT NULL,
    case_count  integer NOT NULL CHECK (case_count > 0),
    created_at  bigint NOT NULL,
    UNIQUE (name, sha256)
);
CREATE INDEX datasets_newest ON datasets (created_at DESC, id DESC);

-- One row a case, in dataset order (position is 1-based). body is the normalized case
-- {id, vars, expected, metadata}.
CREATE TABLE dataset_cases (
    dataset_id  text NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    position    integer NOT NULL CHECK (position > 0),
    case_id     text NOT NULL,
    body        jsonb NOT NULL,
    PRIMARY KEY (dataset_id, position),
    UNIQUE (dataset_id, case_id)
);
