-- dim_gpu: every GPU the site owns or the lake has seen. Rebuilt whole on every build.
-- kind: table
-- grain: one row per gpu_uuid
-- columns:
--   gpu_uuid [text] GPU (NVML UUID)
--   host [text] server (inventory; else where it was last seen)
--   gpu_index [int] index on the host
--   gpu_model [text] NVML name
--   rack [text] rack (NULL when not in the inventory)
--   site [text] site
--   region [text] grid region (e.g. FR)
--   purchased_on [DATE] purchase date
--   purchase_price_usd [USD] purchase price
--   embodied_kgco2e [kgCO2e] manufacturing footprint
--   lifetime_years [years] depreciation / amortisation lifetime
--   retired_on [DATE] the day the GPU left the fleet (NULL: still in it, or not in the inventory)
--   in_inventory [bool] listed in the inventory file; false: seen in the lake only (stale inventory)
--   first_seen_day [DATE] first day with readings (NULL: never seen)
--   last_seen_day [DATE] last day with readings
WITH seen AS (
    SELECT
        gpu_uuid,
        arg_max(host, day) AS host,
        -- the latest day's, as the host: from the day just built only, a GPU not read that day lost
        -- its index, and a backfill of an old day put the old one back
        arg_max(gpu_index, day) FILTER (WHERE gpu_index IS NOT NULL) AS gpu_index,
        arg_max(gpu_model, day) AS gpu_model,
        min(day) AS first_seen_day,
        max(day) AS last_seen_day
    FROM fct_gpu_coverage_daily
    GROUP BY gpu_uuid
)
SELECT
    coalesce(i.gpu_uuid, s.gpu_uuid) AS gpu_uuid,
    coalesce(i.host, s.host) AS host,
    coalesce(i.gpu_index, s.gpu_index) AS gpu_index,
    coalesce(i.gpu_model, s.gpu_model) AS gpu_model,
    i.rack,
    i.site,
    i.region,
    i.purchased_on,
    i.purchase_price_usd,
    i.embodied_kgco2e,
    i.lifetime_years,
    i.retired_on,
    i.gpu_uuid IS NOT NULL AS in_inventory,
    s.first_seen_day,
    s.last_seen_day
FROM int_inventory AS i
FULL OUTER JOIN seen AS s USING (gpu_uuid)
