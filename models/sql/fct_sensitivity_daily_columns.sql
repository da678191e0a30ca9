-- fct_sensitivity_daily_columns: the joint sensitivity's columns added to a fct_sensitivity_daily
-- created before they existed (NULL on its earlier rows).
ALTER TABLE fct_sensitivity_daily ADD COLUMN IF NOT EXISTS weight_utilization DOUBLE;
ALTER TABLE fct_sensitivity_daily ADD COLUMN IF NOT EXISTS weight_network_bandwidth DOUBLE;
ALTER TABLE fct_sensitivity_daily ADD COLUMN IF NOT EXISTS typical_value DOUBLE;
ALTER TABLE fct_sensitivity_daily ADD COLUMN IF NOT EXISTS typical_workload VARCHAR
