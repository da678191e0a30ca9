-- fct_check_results: outcome of every data check (Great Expectations) run on a day.
-- Filled by warehouse.checks.run_checks; this file gives its shape.
-- kind: results
-- grain: one row per (day, suite, expectation) per check run
-- columns:
--   day [DATE] UTC day checked
--   suite [text] expectation suite (one per relation)
--   expectation [text] expectation type and its column, e.g. expect_column_values_to_be_between(power_w)
--   severity [text] 'blocking' (a failure stops the day's run), 'warning' (reported, run goes on) or
--     'rebuild' (the gate: the lake's files of the day changed since its build; its facts stand on
--     what the build read, and a re-run of the day takes the change in)
--   success [bool] the check passed
--   observed_value [text] what failed, in words (e.g. '37 rows of 5,529,600 have power_w < 0')
--   details [text] JSON: the expectation's arguments, element and unexpected counts, and `validated`
--     (the small table DuckDB summarised the rule into and the expectation GX ran on it)
--   checked_at [TIMESTAMPTZ, UTC] when the check ran
WITH shape AS (
    SELECT
        NULL::DATE AS day,
        NULL::VARCHAR AS suite,
        NULL::VARCHAR AS expectation,
        NULL::VARCHAR AS severity,
        NULL::BOOLEAN AS success,
        NULL::VARCHAR AS observed_value,
        NULL::VARCHAR AS details,
        NULL::TIMESTAMPTZ AS checked_at
)
SELECT * FROM shape WHERE false
