-- power_input_day_counts: the rows the stored sums of each day stand for (power and model known),
-- to tell whether a day's stored sums still match its samples. Read by models.power_features.
-- Parameters: $first_day DATE, $last_day DATE. Columns: day [DATE], n_rows [count].
SELECT day, count(*) AS n_rows
FROM power_input_samples
WHERE day BETWEEN $first_day AND $last_day AND power_w IS NOT NULL AND gpu_model IS NOT NULL
GROUP BY day
