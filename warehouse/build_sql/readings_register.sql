-- readings_register: one file of the day's clean readings, written by the build.
-- parameters: $day [DATE], $path [text, absolute], $n_rows [count]
INSERT INTO stg_gpu_samples_files VALUES ($day::DATE, $path, $n_rows, now())
