-- fct_pue_hourly_gate: the blocking rule on one day of fct_pue_hourly, counted: IT energy is
-- a finite number, never negative (NaN < 0 is false: a NaN had passed). Not a warehouse relation (no `kind:`): read by warehouse.gate only.
-- grain: one row for the day
-- parameters: $day [DATE] the day checked
-- columns:
--   n_rows [count] site-hours of the day
--   it_energy_negative_rows [count] rows with it_energy_kwh < 0, NaN or infinite
--   it_energy_negative_examples [list] up to 3 such values
SELECT
    count(*) AS n_rows,
    count(*) FILTER (WHERE it_energy_kwh < 0 OR NOT isfinite(it_energy_kwh)) AS it_energy_negative_rows,
    list(it_energy_kwh ORDER BY it_energy_kwh) FILTER (WHERE it_energy_kwh < 0 OR NOT isfinite(it_energy_kwh))[1:3]
        AS it_energy_negative_examples
FROM fct_pue_hourly
WHERE day = $day::DATE
