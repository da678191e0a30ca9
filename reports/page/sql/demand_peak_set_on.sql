-- Each site's demand charge on $day, for the cost card's line when it is 0: whether its billing
-- month has been billed any demand charge up to $day (`billed`: false for a site with no demand
-- charge, whose card need not name one), and, where the day added nothing to the month's peak,
-- the earlier day that set it (the earliest whose peak_kw is the month's peak before this day,
-- rpt_demand_peak_daily.month_peak_before_kw; NULL otherwise).
-- params: $day [DATE] the report's UTC day
WITH today AS (
    SELECT site, billing_month, charged_kw, month_peak_before_kw
    FROM rpt_demand_peak_daily
    WHERE day = $day
)
SELECT t.site, t.billing_month,
       coalesce(bool_or(m.demand_charge_usd > 0), false) AS billed,
       min(m.day) FILTER (WHERE t.charged_kw = 0 AND m.day < $day AND m.peak_kw = t.month_peak_before_kw) AS peak_day,
       t.month_peak_before_kw AS peak_kw
FROM today AS t
JOIN rpt_demand_peak_daily AS m
  ON m.site = t.site AND m.billing_month IS NOT DISTINCT FROM t.billing_month AND m.day <= $day
GROUP BY ALL
ORDER BY t.site, t.billing_month
