-- day_jobs_columns: the jobs contract's columns (collectors/schema.py), typed, no rows.
-- Internal: a temp view of models.day_jobs, put first in day_jobs.sql so that a jobs relation
-- lacking an optional column (a hand-made table) still gives it, NULL.
-- Quoted: `user`, `deferrable` and `precision` are SQL keywords.
SELECT
    CAST(NULL AS VARCHAR) AS job_id, CAST(NULL AS VARCHAR) AS host, CAST(NULL AS VARCHAR) AS gpu_uuid,
    CAST(NULL AS TIMESTAMPTZ) AS started_at, CAST(NULL AS TIMESTAMPTZ) AS ended_at,
    CAST(NULL AS VARCHAR) AS "user", CAST(NULL AS VARCHAR) AS team, CAST(NULL AS VARCHAR) AS stage,
    CAST(NULL AS VARCHAR) AS workload_class, CAST(NULL AS BOOLEAN) AS "deferrable",
    CAST(NULL AS BIGINT) AS requests_total, CAST(NULL AS BIGINT) AS tokens_total,
    CAST(NULL AS BIGINT) AS samples_total, CAST(NULL AS DOUBLE) AS flops_total,
    CAST(NULL AS VARCHAR) AS "precision", CAST(NULL AS INTEGER) AS batch_size,
    CAST(NULL AS DATE) AS date
LIMIT 0
