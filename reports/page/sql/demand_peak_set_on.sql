-- For a day whose demand charge is 0 because an earlier day of its billing month set a higher
-- peak: that earlier day, per site (the earliest day whose peak_kw is the month's peak before this
-- day, rpt_demand_peak_daily.month_peak_before_kw). A day that added to the peak has no row.
-- params: $day [DATE] the report's UTC day
WITH today AS (
    SELECT site, billing_month, month_peak_before_kw
    FROM rpt_demand_peak_daily
    WHERE day = $day AND charged_kw = 0 AND month_peak_before_kw IS NOT NULL
)
SELECT t.site, t.billing_month, min(earlier.day) AS peak_day, t.month_peak_before_kw AS peak_kw
FROM today AS t
JOIN rpt_demand_peak_daily AS earlier
  ON earlier.site = t.site AND earlier.billing_month IS NOT DISTINCT FROM t.billing_month AND earlier.day < $day
 AND earlier.peak_kw = t.month_peak_before_kw
GROUP BY ALL
ORDER BY t.site, t.billing_month
