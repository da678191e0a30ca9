"""The daily cost step hands the cost accounts the warehouse's meter bridging: the demand charge
integrates the facility meter per quarter-hour by fct_pue_hourly's rule, and a site whose meter is
read every 3 minutes ([warehouse] max_meter_gap_s = 300) had its hours bridged by the build but its
quarter-hours not (the default 120 s), so its bill fell back to hourly averages."""

from __future__ import annotations

import dataclasses


def test_the_cost_step_bridges_the_meter_as_the_warehouse_does(tmp_path, monkeypatch):
    import joulehouse.reports.accounts.carbon as carbon
    import joulehouse.reports.accounts.compute_cost as compute_cost
    import joulehouse.reports.accounts.tco as tco
    from joulehouse import daily

    @dataclasses.dataclass
    class Result:
        notes: tuple = ()

    seen: dict = {}
    monkeypatch.setattr(carbon, "carbon_day", lambda *a, **k: Result())
    monkeypatch.setattr(compute_cost, "compute_cost_day", lambda *a, **k: 0)
    monkeypatch.setattr(tco, "tco_day", lambda *a, **k: seen.update(k) or Result())
    config = tmp_path / "joulehouse.toml"
    config.write_text(f'[warehouse]\ndb_path = "{tmp_path / "w.duckdb"}"\nmax_meter_gap_s = 300\n', encoding="utf-8")
    daily.account_carbon_and_cost("2026-06-10", str(config))
    assert seen["max_meter_gap_s"] == 300
