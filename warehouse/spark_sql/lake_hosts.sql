-- lake_hosts (Spark SQL): the hosts with gpu_samples readings in the partitions a build of :day
-- reads (its own date= folder and its neighbours'), as warehouse/build_sql/lake_hosts.sql lists
-- them for DuckDB from the file names. Spark answers it from the partition values alone.
-- input: temp view raw_gpu_samples (warehouse.spark_engine.register_lake)
-- parameters: :day DATE
-- columns: host [text]
SELECT DISTINCT host
FROM raw_gpu_samples
WHERE date BETWEEN date_sub(:day, 1) AND date_add(:day, 1) AND host IS NOT NULL
