-- power_sums_build_ids_none: the body of the temp view power_sums_build_ids for a samples relation
-- the warehouse does not build (an import, a test frame): no build ids, so a day's stored sums are
-- checked by its row count alone. Created by models.power_features.
-- Columns: day [DATE], build_id [UUID], readings_pruned [bool].
SELECT CAST(NULL AS DATE) AS day, CAST(NULL AS UUID) AS build_id, false AS readings_pruned
WHERE false
