-- acct_dim_gpu: the inventory as the accounts read it (columns vary by site; Python picks
-- site, region, rack, embodied_kgco2e (kgCO2e), lifetime_years (years), purchase_price_usd ($)).
-- Grain: one row per gpu_uuid. No parameters.
WITH inventory AS (
    SELECT * FROM dim_gpu
)
SELECT * FROM inventory
