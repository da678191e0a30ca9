-- rpt_demand_peak_daily: each site's demand peak of the day and the part of the month's demand
-- charge the day added (reports/accounts/demand.py).
-- kind: day
-- grain: one row per (day, site, billing_month): one billing month a day, two on the UTC day that
--   holds a month's turn in the site's time zone; none for 'unknown', where the accounts put GPUs the
--   inventory places at no site, beside a day's known sites (no utility meters it: their demand charge
--   is NULL in rpt_tco_daily); a fleet that knows no site at all is one, 'unknown'
-- Written by reports.accounts.tco.tco_day; a day's rows are replaced as a whole when it is re-run.
-- Summed over a month's days (accounted in date order), demand_charge_usd is rate x the month's peak.
-- columns:
--   day [DATE] UTC day
--   site [text] site
--   billing_month [DATE] first day of the utility's local month (the site's [tco] site_prices zone, else
--     [tco] tariff_timezone) the row's demand intervals start in (in a zone off the hour, +05:30, the hour
--     of the turn has intervals in both) (NULL in rows written before it was kept: their UTC day's month)
--   peak_hour_at [TIMESTAMPTZ, UTC] the hour that holds the day's highest demand interval (the earliest of
--     equal ones): its GPU-hours pay the charge
--   peak_kw [kW] the site's average power over that interval (demand_interval_minutes; an interval the
--     meter did not cover takes its hour's average)
--   demand_interval_minutes [min] the interval the site's demand was taken over that day: [tco]
--     demand_interval_minutes (the utility's), 60 where the meter's readings per interval were not there
--     (hourly averages); a day is compared with its month's earlier days whatever their interval, and its
--     account's notes name those taken over another (NULL in rows written before it was kept)
--   peak_basis [text] 'facility_meter' (the meter covered enough of the interval, fct_pue_hourly's rule per interval,
--     or of its hour, fct_pue_hourly) or 'gpu_it_x_pue' (the GPU-hours' IT energy x PUE)
--   month_peak_before_kw [kW] the highest peak_kw of the billing month's earlier days (NULL: none accounted)
--   charged_kw [kW] max(0, peak_kw - month_peak_before_kw): what the day adds to the month's peak
--   demand_charge_usd [USD] charged_kw x demand_charge_usd_per_kw_month
CREATE TABLE IF NOT EXISTS rpt_demand_peak_daily (
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    billing_month DATE,
    peak_hour_at TIMESTAMPTZ NOT NULL,
    peak_kw DOUBLE,
    demand_interval_minutes INTEGER,
    peak_basis VARCHAR,
    month_peak_before_kw DOUBLE,
    charged_kw DOUBLE,
    demand_charge_usd DOUBLE
);
