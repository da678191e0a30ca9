-- fit_activity_kind: the activity measure a GPU is read in by the models that score it with its
-- model's power fit: the measure the fit reads ('sm_active' for a fit on DCGM's SM and DRAM
-- activity, feature set 'dcgm'; 'util_gpu' for one on NVML's utilisations, 'nvml'), and the
-- stream's own kind for a model without a fit. A GPU read by DCGM carries both, and the fit's
-- predictions are only right in the measure it was fitted on. The fit itself does not call it: it
-- chooses its feature set from the window's rows (power_feature_choice.sql), and this macro reads
-- that choice back from the stored fits. A scalar macro
-- (models.activity.create_activity_macros; inlined for Spark by warehouse/spark_dialect.py).
-- Arguments: gpu_model, stream_kind (gpu_activity_samples.activity_kind), sm_active_models,
--   util_gpu_models (VARCHAR[]: the GPU models whose fit reads each measure, the parameters
--   models.recommend_inputs.fit_activity_models gives).
CREATE OR REPLACE TEMP MACRO fit_activity_kind(gpu_model, stream_kind, sm_active_models, util_gpu_models) AS (
    CASE WHEN list_contains(CAST(sm_active_models AS VARCHAR[]), gpu_model) THEN 'sm_active'
         WHEN list_contains(CAST(util_gpu_models AS VARCHAR[]), gpu_model) THEN 'util_gpu'
         ELSE stream_kind END
)
