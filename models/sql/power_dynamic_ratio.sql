-- power_dynamic_ratio: the dynamic term's feature (0..1) of one sample, shared by the fit and
-- every prediction so they cannot disagree. A scalar macro, not a relation (models.power creates
-- it per connection; for Spark, warehouse/spark_dialect.py inlines this expression at each call).
--   activity^gamma * clock_ratio^alpha, where, with a hold time constant hold_s > 0 (s), the
--   activity part is at least the last busy sample's activity^gamma decayed by exp(-since/hold_s):
--   power stays up for a moment after work stops (the driver holds the clocks, the power sensor
--   averages), which a log without clock readings can only see as this decay.
-- Arguments: activity_ratio (0..1), prior_busy_activity_ratio (0..1), since_busy_s (s, NULL: none),
--   clock_ratio (0..1), alpha (exponent of the clock ratio), gamma (exponent of activity), hold_s (s).
CREATE OR REPLACE TEMP MACRO power_dynamic_ratio(
    activity_ratio, prior_busy_activity_ratio, since_busy_s, clock_ratio, alpha, gamma, hold_s
) AS (
    CASE
        WHEN hold_s > 0 AND since_busy_s IS NOT NULL
            THEN greatest(pow(activity_ratio, gamma),
                          pow(prior_busy_activity_ratio, gamma) * exp(-least(since_busy_s / hold_s, 700.0)))
        ELSE pow(activity_ratio, gamma)
    END * pow(clock_ratio, alpha)
)
