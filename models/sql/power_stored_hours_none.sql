-- power_stored_hours_none: no stored statistics stand in for training samples (the reference path,
-- models.power_features.build_power_features, reads every sample). Columns: fct_power_fit_sums_hourly's.
SELECT * FROM fct_power_fit_sums_hourly WHERE false
