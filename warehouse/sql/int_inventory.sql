-- int_inventory: the site inventory file, typed. Internal, reloaded on every build.
-- kind: temp
-- grain: one row per GPU listed in the inventory CSV
-- columns: the CSV's header row must name (order free, extra columns ignored):
--   gpu_uuid [text] NVML UUID
--   host [text] server, in any spelling: read as the lake names it (lowercase short name, an IP
--     address whole: collectors/sources/host_names.py), warehouse/inventory.py rewrites it
--   gpu_index [int] index on the host
--   gpu_model [text] NVML name
--   rack [text] rack
--   site [text] site
--   region [text] grid region
--   purchased_on [YYYY-MM-DD] purchase date
--   purchase_price_usd [USD] purchase price
--   embodied_kgco2e [kgCO2e] manufacturing footprint
--   lifetime_years [years] amortisation lifetime
--   and may name (NULL when it does not):
--   retired_on [YYYY-MM-DD] the day the GPU left the fleet (sold, scrapped, moved to another site):
--     from that day on its unread hours are charged nothing (reports/accounts/fleet_hours.py)
WITH csv_rows AS (
    -- a file without an optional column was given it, empty (warehouse.inventory.inventory_file)
    SELECT * FROM read_csv($inventory_path, header = true, all_varchar = true)
)
SELECT
    trim(gpu_uuid) AS gpu_uuid,
    nullif(trim(host), '') AS host,  -- empty: the lake's host (dim_gpu), on Spark too, whose CSV rows hold ''
    CAST(nullif(trim(gpu_index), '') AS SMALLINT) AS gpu_index,
    nullif(trim(gpu_model), '') AS gpu_model,
    nullif(trim(rack), '') AS rack,
    nullif(trim(site), '') AS site,
    nullif(trim(region), '') AS region,
    CAST(nullif(trim(purchased_on), '') AS DATE) AS purchased_on,
    CAST(nullif(trim(purchase_price_usd), '') AS DOUBLE) AS purchase_price_usd,
    CAST(nullif(trim(embodied_kgco2e), '') AS DOUBLE) AS embodied_kgco2e,
    CAST(nullif(trim(lifetime_years), '') AS DOUBLE) AS lifetime_years,
    CAST(nullif(trim(retired_on), '') AS DATE) AS retired_on
FROM csv_rows
WHERE nullif(trim(gpu_uuid), '') IS NOT NULL
