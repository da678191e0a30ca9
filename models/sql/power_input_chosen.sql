-- power_input_chosen: the fit's samples of the chosen stream of each GPU and day only
-- (power_input_streams, models/sql/gpu_activity_streams.sql): NVML's 1 Hz rows of a GPU that DCGM
-- also reads would otherwise outvote DCGM's in the feature choice.
-- A temporary view that models.power_features creates over power_samples_source.
SELECT s.*
FROM power_samples_source AS s
SEMI JOIN power_input_streams AS c
    ON c.day = s.day AND c.gpu_uuid = s.gpu_uuid AND c.source IS NOT DISTINCT FROM s.source
