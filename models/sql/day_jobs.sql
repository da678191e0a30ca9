-- day_jobs: the (job, GPU) rows of the jobs relation that overlap one UTC day, for the efficiency
-- step (models.efficiency: eff_input_jobs) and the accounts (reports.accounts: acct_input_jobs),
-- staged alike by models.day_jobs.stage_day_jobs so that both see the same jobs.
-- Internal: a temp table. Parameters: $first_date, $day [DATE]; $day_start, $day_end
--   [TIMESTAMPTZ, UTC] the day's bounds.
-- The jobs dataset is partitioned by the UTC date of started_at: a job running into $day from
--   an earlier day is in an earlier partition, found by its interval among the partitions from
--   $first_date (models.job_max_days before $day) to $day. A row without an end is kept (the
--   accounts set it aside with a reason, the efficiency step holds nothing for it); rows are not
--   deduplicated here (each reader does, keeping the latest end).
-- columns: day_jobs_columns' (NULL where the relation lacks one) plus any other of the relation.
SELECT * FROM day_jobs_columns
UNION ALL BY NAME
SELECT * FROM day_jobs_source
WHERE date BETWEEN $first_date AND $day
  AND started_at < $day_end
  AND (ended_at > $day_start OR ended_at IS NULL)
