-- day_jobs_dated: a jobs table without the lake's date= partition column, each row given the
-- partition the lake's writer puts it in: the UTC date of its started_at (collectors/schema.py
-- TIME_COLUMN). Internal: a temp view of models.day_jobs over day_jobs_undated (the table).
SELECT *, CAST(timezone('UTC', started_at) AS DATE) AS date
FROM day_jobs_undated
