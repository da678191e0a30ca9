"""Quarantine rules, the raw = clean + quarantined identity, and the inventory flag."""

from __future__ import annotations

import datetime as dt

import pytest
from warehouse_lakes import DAY, gpu_rows, hourly, write

from joulehouse.warehouse.build import BuildError

BAD_ROWS = {
    "power_negative": dict(power_w=-3.0),
    "power_unit_mw": dict(power_w=250_000.0),  # 250 W written in mW
    "power_over_limit": dict(power_w=1500.0),  # 700 W limit, ratio 1.5
    "temp_out_of_range": dict(temp_c=180.0),
    "ratio_out_of_range": dict(sm_active_ratio=1.7),
    "util_out_of_range": dict(util_gpu_pct=140.0),
    "clock_out_of_range": dict(sm_clock_mhz=65535),
    "counter_negative": dict(energy_mj_total=-5),
    "power_not_finite": dict(power_w=float("nan")),
    "limit_not_finite": dict(power_limit_w=float("nan")),
}


def test_each_rule_sends_its_row_to_quarantine_with_its_reason(lake, warehouse):
    rows = gpu_rows(range(0, 100), 100.0, temp_c=50.0, util_gpu_pct=30.0, sm_active_ratio=0.3, sm_clock_mhz=1500)
    for i, (reason, bad) in enumerate(BAD_ROWS.items()):
        rows[10 + 5 * i].update(bad)
    write(lake, rows)
    con = warehouse()
    got = dict(con.execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY reason").fetchall())
    assert got == {reason: 1 for reason in BAD_ROWS}
    raw = con.execute("SELECT count(*) FROM raw_gpu_samples WHERE date = ?", [DAY]).fetchone()[0]
    clean = con.execute("SELECT count(*) FROM stg_gpu_samples WHERE day = ?", [DAY]).fetchone()[0]
    assert raw == clean + len(BAD_ROWS) == 100


def test_power_without_a_known_limit_is_checked_against_the_absolute_bound(lake, warehouse):
    rows = gpu_rows(range(0, 10), 100.0, limit_w=None)
    rows[3]["power_w"] = 4000.0
    rows[5]["power_w"] = 90_000.0
    write(lake, rows)
    got = dict(warehouse().execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY reason").fetchall())
    assert got == {"power_over_bound": 1, "power_unit_mw": 1}


@pytest.mark.parametrize("limit_w", [float("nan"), float("inf")])
def test_a_limit_that_is_not_a_number_never_lets_a_counter_glitch_or_a_mw_reading_through(lake, warehouse, limit_w):
    """NaN compares above every number in DuckDB: a NaN limit passed power_w > 1.5 x limit and made
    the counter's plausible maximum NaN, so a +2.5 kWh glitch read as 2.8 kWh for a 300 W hour."""
    glitch_mj = 9_000_000_000

    def counter(t):
        return 300 * t * 1000 + (glitch_mj if t >= 610 else 0)

    rows = gpu_rows(range(0, 3601, 10), 300.0, counter_mj=counter, source="dcgm")
    rows[61]["power_limit_w"] = limit_w  # the reading at t = 610 s, where the counter jumps
    rows[200].update(power_w=20_000.0, power_limit_w=limit_w)  # mW stored as W
    write(lake, rows)
    con = warehouse()
    got = dict(con.execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY reason").fetchall())
    assert got == {"limit_not_finite": 2}
    # 300 W over the hour but the 20 s around the glitch, whose counter jump is implausible and
    # longer than a power gap may be bridged
    hour = hourly(con)[0]
    assert hour["energy_j"] == pytest.approx(300.0 * (3600 - 20)) and hour["coverage_ratio"] == pytest.approx(3580 / 3600)


def test_gpu_missing_from_inventory_is_kept_and_flagged(lake, tmp_path, warehouse):
    write(lake, gpu_rows(range(0, 61), 100.0, uuid="GPU-known") + gpu_rows(range(0, 61), 100.0, uuid="GPU-stranger"))
    inventory = tmp_path / "inventory.csv"
    inventory.write_text(
        "gpu_uuid,host,gpu_index,gpu_model,rack,site,region,purchased_on,purchase_price_usd,embodied_kgco2e,lifetime_years\n"
        "GPU-known,node-01,0,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5\n"
        "GPU-spare,node-02,0,NVIDIA H200,r2,site-a,FR,2025-01-01,35000,160,5\n"
    )
    from joulehouse.settings import WarehouseSettings

    con = warehouse(settings=WarehouseSettings(inventory_path=str(inventory)))
    flags = dict(con.execute("SELECT gpu_uuid, bool_and(in_inventory) FROM stg_gpu_samples GROUP BY ALL").fetchall())
    assert flags == {"GPU-known": True, "GPU-stranger": False}
    energy = dict(con.execute("SELECT gpu_uuid, sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY ALL").fetchall())
    assert energy["GPU-stranger"] == pytest.approx(6000 / 3.6e6)
    dim = {r[0]: r[1:] for r in con.execute("SELECT gpu_uuid, in_inventory, rack, first_seen_day FROM dim_gpu").fetchall()}
    assert dim == {"GPU-known": (True, "r1", DAY), "GPU-stranger": (False, None, DAY), "GPU-spare": (True, "r2", None)}


def test_a_gpu_outside_the_inventory_keeps_the_index_of_the_last_day_it_was_read(lake, warehouse):
    """From the day just built only, the GPU's index went NULL on a day it was not read, and a
    backfill of an older day put that day's index back beside the latest host."""
    one_day = dt.timedelta(days=1)
    first = [dict(r, gpu_index=3) for r in gpu_rows(range(0, 61), 100.0, uuid="GPU-moved", host="node-01")]
    moved = [dict(r, gpu_index=5, sampled_at=r["sampled_at"] + one_day)
             for r in gpu_rows(range(0, 61), 100.0, uuid="GPU-moved", host="node-02")]
    other = [dict(r, sampled_at=r["sampled_at"] + 2 * one_day) for r in gpu_rows(range(0, 61), 100.0, uuid="GPU-0")]
    write(lake, first + moved + other)
    now = dt.datetime.combine(DAY + 3 * one_day, dt.time(), dt.timezone.utc)
    # the first day, the day it moved, a day it was not read, then a backfill of the first day
    for day, expected in ((DAY, ("node-01", 3)), (DAY + one_day, ("node-02", 5)), (DAY + 2 * one_day, ("node-02", 5)),
                          (DAY, ("node-02", 5))):
        con = warehouse(day=day, now=now)
        assert con.execute("SELECT host, gpu_index FROM dim_gpu WHERE gpu_uuid = 'GPU-moved'").fetchone() == expected, day


def test_an_inventory_may_say_when_a_gpu_left_the_fleet(lake, tmp_path, warehouse):
    """retired_on is optional: a file with it types it into dim_gpu (the accounts stop charging the
    GPU from that day), a file without it builds as before with NULL."""
    write(lake, gpu_rows(range(0, 61), 100.0, uuid="GPU-known"))
    from joulehouse.settings import WarehouseSettings

    header = "gpu_uuid,host,gpu_index,gpu_model,rack,site,region,purchased_on,purchase_price_usd,embodied_kgco2e,lifetime_years"
    with_retired = tmp_path / "with.csv"
    with_retired.write_text(f"{header},retired_on\n"
                            "GPU-known,node-01,0,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5,\n"
                            "GPU-sold,node-02,0,NVIDIA H200,r2,site-a,FR,2025-01-01,35000,160,5,2025-12-31\n")
    without = tmp_path / "without.csv"
    without.write_text(f"{header}\nGPU-known,node-01,0,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5\n")
    con = warehouse(settings=WarehouseSettings(inventory_path=str(with_retired)))
    assert dict(con.execute("SELECT gpu_uuid, retired_on FROM dim_gpu").fetchall()) == {
        "GPU-known": None, "GPU-sold": dt.date(2025, 12, 31)}
    con = warehouse(settings=WarehouseSettings(inventory_path=str(without)))
    assert con.execute("SELECT gpu_uuid, retired_on FROM dim_gpu").fetchall() == [("GPU-known", None)]


@pytest.mark.parametrize(("column", "value", "kind"), [
    ("retired_on", "yesterday", "day"), ("purchased_on", "2024-13-01", "day"),
    ("purchase_price_usd", "30k", "finite number, 0 or more"), ("gpu_index", "two", "whole number"),
    # a lifetime of 0 made the day's capital NaN, -4 made it 0, NaN left it NULL and the total counted 0
    ("lifetime_years", "0", "finite number above 0"), ("lifetime_years", "-4", "finite number above 0"),
    ("lifetime_years", "nan", "finite number above 0"), ("purchase_price_usd", "-1", "finite number, 0 or more"),
    ("embodied_kgco2e", "inf", "finite number, 0 or more")])
def test_a_wrong_inventory_value_names_the_file_line_and_column(lake, tmp_path, warehouse, column, value, kind):
    """Before, DuckDB's cast failed the day naming the value and the SQL, not the file or its line.
    What DuckDB's casts accept still builds (2024-3-1, 1e3)."""
    write(lake, gpu_rows(range(0, 5), 100.0))
    from joulehouse.settings import WarehouseSettings

    row = dict(gpu_uuid="GPU-0", host="node-01", gpu_index="0", gpu_model="H100", rack="r1", site="s", region="FR",
               purchased_on="2024-03-01", purchase_price_usd="30000", embodied_kgco2e="150", lifetime_years="5",
               retired_on="")
    good = dict(row, gpu_uuid="GPU-1")
    inventory = tmp_path / "inventory.csv"
    inventory.write_text(",".join(row) + "\n" + ",".join(good.values()) + "\n"
                         + ",".join(dict(row, **{column: value}).values()) + "\n")
    with pytest.raises(BuildError, match=rf"^cannot build {DAY}: inventory file {inventory} line 3: {column} "
                                         rf"'{value}' is not a {kind}"):
        warehouse(settings=WarehouseSettings(inventory_path=str(inventory)))
    lenient = tmp_path / "lenient.csv"
    accepted = dict(row, purchased_on="2024-3-1", purchase_price_usd="3e4")
    lenient.write_text(",".join(row) + "\n" + ",".join(accepted.values()) + "\n")
    con = warehouse(settings=WarehouseSettings(inventory_path=str(lenient)))
    assert con.execute("SELECT purchased_on, purchase_price_usd FROM dim_gpu").fetchall() == [(dt.date(2024, 3, 1), 30000.0)]


def test_a_configured_inventory_that_is_not_there_is_refused_naming_it(lake, tmp_path, warehouse):
    """An operator's trial: a typo in inventory_path built the day without an inventory, and the
    cost of the day rose 46% (capital from the defaults) with the path named nowhere."""
    write(lake, gpu_rows(range(0, 5), 100.0))
    from joulehouse.settings import WarehouseSettings

    missing = tmp_path / "inventroy.csv"
    with pytest.raises(BuildError, match=rf"inventory file {missing} \(\[warehouse\] inventory_path\) does not exist"):
        warehouse(settings=WarehouseSettings(inventory_path=str(missing)))
    binary = tmp_path / "inventory.csv"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(BuildError, match=rf"inventory file {binary} cannot be read as a CSV"):
        warehouse(settings=WarehouseSettings(inventory_path=str(binary)))


def test_inventory_without_required_columns_is_refused_naming_them(lake, tmp_path, warehouse):
    write(lake, gpu_rows(range(0, 5), 100.0))
    inventory = tmp_path / "inventory.csv"
    inventory.write_text("gpu_uuid,host\nGPU-0,node-01\n")
    from joulehouse.settings import WarehouseSettings

    with pytest.raises(BuildError, match="lacks columns.*gpu_model"):
        warehouse(settings=WarehouseSettings(inventory_path=str(inventory)))


def test_duplicates_are_found_at_any_rate_and_distinct_readings_in_one_second_are_kept(lake, warehouse):
    """The build looks for duplicate keys only in streams with two readings in one second: a 10 Hz
    stream has them everywhere and must keep all its distinct readings; a 1 Hz stream has them only
    where a row came twice. Both duplicates are quarantined, nothing else."""
    fast = gpu_rows([i / 10 for i in range(0, 600)], 200.0, uuid="GPU-FAST")
    slow = gpu_rows(range(0, 600), 100.0, uuid="GPU-SLOW")
    write(lake, fast + [fast[123]] + slow + [slow[42]])
    con = warehouse()
    quarantined = con.execute("SELECT gpu_uuid, reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL ORDER BY 1").fetchall()
    assert quarantined == [("GPU-FAST", "duplicate_key", 1), ("GPU-SLOW", "duplicate_key", 1)]
    clean = dict(con.execute("SELECT gpu_uuid, count(*) FROM stg_gpu_samples GROUP BY ALL").fetchall())
    assert clean == {"GPU-FAST": 600, "GPU-SLOW": 600}


def test_a_sentinel_clock_is_quarantined_and_never_becomes_the_highest_clock(lake, warehouse):
    """A 65535 MHz SM clock (a driver that could not read it) was clean, became the model's
    f_max_mhz, and scaled every other reading's clock ratio toward 0; a site can tighten the bound."""
    from joulehouse.settings import WarehouseSettings

    rows = gpu_rows(range(0, 60), 300.0, sm_clock_mhz=1980, mem_clock_mhz=2619)
    rows[10]["sm_clock_mhz"] = 65535
    rows[20]["sm_clock_mhz"] = -1
    rows[30]["mem_clock_mhz"] = 2_619_000  # kHz stored as MHz
    rows[40]["sm_clock_mhz"] = 2500  # above this site's own bound below
    write(lake, rows)
    con = warehouse(settings=WarehouseSettings(max_sm_clock_mhz=2200))
    quarantined = con.execute("SELECT epoch(sampled_at)::BIGINT % 86400, reason FROM quarantine_gpu_samples "
                              "ORDER BY 1").fetchall()
    assert quarantined == [(10, "clock_out_of_range"), (20, "clock_out_of_range"), (30, "clock_out_of_range"),
                           (40, "clock_out_of_range")]
    assert con.execute("SELECT max(sm_clock_mhz), max(mem_clock_mhz) FROM stg_gpu_samples").fetchone() == (1980, 2619)


def test_readings_filed_under_another_day_are_quarantined_and_the_day_builds(lake, warehouse):
    """Another tool's file for the day that starts before midnight, and one filed under the wrong
    day: kept as the folder's day, they made GPU-hours outside the day (the gate stopped the whole
    day without naming the file) or NULL-energy hours, and their own day never saw them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = lake / "gpu_samples" / f"date={DAY}" / "host=node-01"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(gpu_rows(range(-30, 3600, 10), 100.0)), folder / "tool.parquet")
    four_days_on = [dict(r, sampled_at=r["sampled_at"] + dt.timedelta(days=3)) for r in gpu_rows(range(0, 600, 10), 50.0,
                                                                                                 uuid="GPU-1")]
    pq.write_table(pa.Table.from_pylist(four_days_on), folder / "misfiled.parquet")
    con = warehouse()
    reasons = con.execute("SELECT gpu_uuid, reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL ORDER BY 1").fetchall()
    assert reasons == [("GPU-0", "outside_partition_day", 3), ("GPU-1", "outside_partition_day", 60)]
    hours = con.execute("SELECT gpu_uuid, hour_at, energy_kwh FROM fct_gpu_energy_hourly").fetchall()
    assert [(u, h.hour) for u, h, _ in hours] == [("GPU-0", 0)] and hours[0][2] == pytest.approx(100.0 * 3590 / 3.6e6)
    from joulehouse.settings import WarehouseSettings
    from joulehouse.warehouse.gate import run_gate

    assert not run_gate(con, DAY, WarehouseSettings()).failed_blocking


def test_of_copies_alike_but_for_one_column_the_same_is_kept_whatever_the_files_order(tmp_path):
    """A late file repeated 300 readings, the same power and counter but temp_c +10 C: which copy
    stayed clean changed from run to run and with compaction (the day's theta with it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from joulehouse.settings import WarehouseSettings
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.db import connect
    from warehouse_lakes import NOW

    original = gpu_rows(range(0, 300), 200.0, counter_mj=lambda t: 10**9 + t * 200_000, temp_c=60.0)
    hotter = [{**r, "temp_c": 70.0} for r in original]
    kept = []
    for first, second in ((original, hotter), (hotter, original)):
        root = tmp_path / f"run{len(kept)}"
        folder = root / "lake" / "gpu_samples" / f"date={DAY}" / "host=node-01"
        folder.mkdir(parents=True)
        for name, rows in (("a.parquet", first), ("b.parquet", second)):
            pq.write_table(pa.Table.from_pylist(rows), folder / name, row_group_size=7)
        con = connect(root / "w.duckdb", root / "lake")
        build_day(con, DAY, WarehouseSettings(), now=NOW)
        kept.append(con.execute("SELECT DISTINCT temp_c FROM stg_gpu_samples").fetchall())
        con.close()
    assert kept == [[(60.0,)], [(60.0,)]]  # the lower of the copies' temperatures, in both orders
