-- fct_energy_vs_limit: the predicted energy-vs-limit curve per GPU model and bottleneck, one day.
-- Grain: day x gpu_model x bottleneck x power_limit_w (delete-then-insert for the day).
-- Columns: day (DATE), gpu_model, bottleneck, is_dominant_bottleneck (the model's most common one:
--   draw that curve when drawing one per model), power_limit_w (W), relative_energy (energy per unit of
--   work / that at the default limit), relative_time (run time / that at the default limit),
--   power_w (W, predicted board power under the limit), energy_kwh (kWh for the work one hour at the
--   default limit does: power_w x relative_time / 1000)
CREATE TABLE IF NOT EXISTS fct_energy_vs_limit (
    day DATE NOT NULL,
    gpu_model VARCHAR NOT NULL,
    bottleneck VARCHAR NOT NULL,
    is_dominant_bottleneck BOOLEAN,
    power_limit_w DOUBLE NOT NULL,
    relative_energy DOUBLE,
    relative_time DOUBLE,
    power_w DOUBLE,
    energy_kwh DOUBLE
)
