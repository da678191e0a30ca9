-- readings_forget_day: drop a day's files from stg_gpu_samples before its rebuild registers new
-- ones (the files stay on disk for readers of an older snapshot: warehouse/readings.py sweeps them).
-- parameters: $day [DATE]
-- columns: path [text] each file no longer listed
DELETE FROM stg_gpu_samples_files WHERE day = $day::DATE RETURNING path
