-- fct_recommendation_extra_columns: consolidation's latency-risk columns added to a
-- fct_recommendation_extra created before they existed (NULL on its earlier rows).
ALTER TABLE fct_recommendation_extra ADD COLUMN IF NOT EXISTS latency_risk VARCHAR;
ALTER TABLE fct_recommendation_extra ADD COLUMN IF NOT EXISTS saturated_minutes_ratio DOUBLE
