-- Replace one day of rpt_context_grid_hourly with the rows registered as _jh_report_rows (same columns, by name).
-- Parameters: $day (DATE). Run as one transaction by reports.inputs.replace_report_day.
DELETE FROM rpt_context_grid_hourly WHERE day = $day;
INSERT INTO rpt_context_grid_hourly BY NAME SELECT * FROM _jh_report_rows WHERE day = $day
