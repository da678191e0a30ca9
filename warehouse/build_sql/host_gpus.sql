-- host_gpus: which GPUs each host's readings name, in the rows a build of $day reads (the day's
-- partition, and its neighbours' readings within $margin_s of midnight).
-- Not a warehouse relation: read by warehouse.host_batches so that hosts sharing a GPU (one moved
-- between servers during the day) are built in one batch and its readings stay one stream.
-- parameters: $day [DATE], $margin_s [s]
-- columns: host [text], gpu_uuid [text]
SELECT DISTINCT r.host, r.gpu_uuid
FROM raw_gpu_samples AS r
WHERE r.date = $day::DATE
   OR ((r.date = $day::DATE - 1 OR r.date = $day::DATE + 1)
       AND r.sampled_at BETWEEN $day::TIMESTAMPTZ - to_seconds($margin_s)
                            AND ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($margin_s))
