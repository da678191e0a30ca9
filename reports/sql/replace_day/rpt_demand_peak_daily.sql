-- Replace one day of rpt_demand_peak_daily with the rows registered as _jh_report_rows (same columns, by name).
-- Parameters: $day (DATE). Run as one transaction by reports.inputs.replace_report_day.
DELETE FROM rpt_demand_peak_daily WHERE day = $day;
INSERT INTO rpt_demand_peak_daily BY NAME SELECT * FROM _jh_report_rows WHERE day = $day
