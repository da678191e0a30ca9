-- holdout_from_epoch_s: where a power fit's held-out time starts, from the first and last reading
-- of the window it fits (s since 1970): the last holdout_fraction of that span, at most
-- holdout_max_days of it. The one rule for power_feature_choice.sql (over the window's samples) and
-- power_window_choice.sql (over the stored sums): the two paths must hold out the same readings.
-- A scalar macro (models.power_features.input_view creates it; for Spark, warehouse/spark_dialect.py
-- inlines it at each call).
-- Arguments: first_epoch_s, last_epoch_s [s since 1970]; holdout_fraction [0..1]; holdout_max_days [days].
-- Returns [s since 1970]: readings at or after it are held out.
CREATE OR REPLACE TEMP MACRO holdout_from_epoch_s(first_epoch_s, last_epoch_s, holdout_fraction, holdout_max_days) AS (
    greatest(first_epoch_s + (last_epoch_s - first_epoch_s) * (1 - holdout_fraction),
             last_epoch_s - holdout_max_days * 86400)
);
