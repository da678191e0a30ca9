"""joulehouse.settings: every value is checked when the settings are read, and a bad one is one
line naming the setting, the value and where it came from, before any work is done."""

from __future__ import annotations

import datetime as dt

import pytest

from joulehouse.settings import Settings, SettingsError, load_settings

# (environment variable, value, the setting the error must name): each was accepted before and
# wrote nonsense into the accounts, or failed only later, after the day's tables were written.
BAD_OVERRIDES = [
    ("JOULEHOUSE_CARBON__DEFAULT_PUE", "-1.3", "[carbon].default_pue"),
    ("JOULEHOUSE_TCO__DEFAULT_PUE", "0.9", "[tco].default_pue"),
    ("JOULEHOUSE_TCO__FLAT_PRICE_USD_PER_MWH", "-80", "[tco].flat_price_usd_per_mwh"),
    ("JOULEHOUSE_TCO__FLAT_PRICE_USD_PER_MWH", "inf", "[tco].flat_price_usd_per_mwh"),
    ("JOULEHOUSE_CARBON__DEFAULT_GRID_GCO2E_PER_KWH", "nan", "[carbon].default_grid_gco2e_per_kwh"),
    ("JOULEHOUSE_CARBON__RESIDUAL_MIX_GCO2E_PER_KWH", "-450", "[carbon].residual_mix_gco2e_per_kwh"),
    ("JOULEHOUSE_TCO__DEMAND_CHARGE_USD_PER_KW_MONTH", "-15", "[tco].demand_charge_usd_per_kw_month"),
    ("JOULEHOUSE_COLLECTOR__INTERVAL_S", "0", "[collector].interval_s"),
    ("JOULEHOUSE_COLLECTOR__INTERVAL_S", "nan", "[collector].interval_s"),
    ("JOULEHOUSE_AGENT__POLL_INTERVAL_S", "-1", "[agent].poll_interval_s"),
    # 1e308 passed "> 0" and the IPMI source raised OverflowError in every poll, no row written
    ("JOULEHOUSE_COLLECTOR__IPMI_TIMEOUT_S", "1e308", "[collector].ipmi_timeout_s"),
    ("JOULEHOUSE_COLLECTOR__IPMI_BACKOFF_S", "1e308", "[collector].ipmi_backoff_s"),
    ("JOULEHOUSE_COLLECTOR__PROMETHEUS_TIMEOUT_S", "1e308", "[collector].prometheus_timeout_s"),
    ("JOULEHOUSE_COLLECTOR__PROMETHEUS_RETRIES", "1000000000", "[collector].prometheus_retries"),
    ("JOULEHOUSE_TCO__FLAT_PRICE_USD_PER_MWH", "1e300", "[tco].flat_price_usd_per_mwh"),
    ("JOULEHOUSE_CARBON__DEFAULT_PUE", "50", "[carbon].default_pue"),
    ("JOULEHOUSE_EXPORT__VALIDITY_HOURS", "-1", "[export].validity_hours"),
    ("JOULEHOUSE_EXPORT__VALIDITY_HOURS", "inf", "[export].validity_hours"),
    ("JOULEHOUSE_CARBON__LIFETIME_YEARS", "0", "[carbon].lifetime_years"),
    ("JOULEHOUSE_TCO__LIFETIME_YEARS", "0", "[tco].lifetime_years"),
    ("JOULEHOUSE_RECOMMEND__HOLDOUT_SHARE", "1", "[recommend].holdout_share"),
    ("JOULEHOUSE_CARBON__IDLE_POLICY", "ignore", "[carbon].idle_policy"),
    ("JOULEHOUSE_TCO__TARIFF_TIMEZONE", "Mars/Olympus", "[tco].tariff_timezone"),
]


@pytest.mark.parametrize(("key", "value", "setting"), BAD_OVERRIDES, ids=[f"{k}={v}" for k, v, _ in BAD_OVERRIDES])
def test_an_override_out_of_range_is_refused_naming_the_setting_and_the_variable(key, value, setting):
    with pytest.raises(SettingsError) as caught:
        load_settings(env={key: value})
    message = str(caught.value)
    assert message.startswith(f"{setting} = {value!r} (from {key}): ") and "\n" not in message


def test_a_file_value_out_of_range_names_the_setting_and_the_file(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("[export]\nvalidity_hours = -1\n[carbon]\nlifetime_years = 0\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(path, env={})
    assert str(caught.value) == (f"[carbon].lifetime_years = 0 (in {path}): input should be greater than or equal to 0.1; "
                                 f"[export].validity_hours = -1 (in {path}): input should be greater than 0")


def test_the_environment_overrides_the_file_and_both_are_typed(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('[carbon]\ndefault_pue = 1.5\nregion = "DE"\n[recommend]\ndo_not_touch = ["GPU-a"]\n')
    settings = load_settings(path, env={"JOULEHOUSE_CARBON__DEFAULT_PUE": "1.25", "joulehouse_tco__rack_kw": "30",
                                        "JOULEHOUSE_RECOMMEND__DO_NOT_TOUCH": "GPU-b, node-7"})
    assert (settings.carbon.default_pue, settings.carbon.region, settings.tco.rack_kw) == (1.25, "DE", 30.0)
    assert settings.recommend.do_not_touch == ("GPU-b", "node-7")
    assert settings.models == Settings().models


@pytest.mark.parametrize(("content", "expected"), [
    (b'[carbon]\nregion = "\xe9le"\n', "is not UTF-8 text (byte 0xe9 at offset 19): TOML files are UTF-8"),
    (b"[carbon\n", "is not valid TOML"),
    (b"[carbon]\nregoin = 'FR'\n", "[carbon]: unknown key 'regoin'"),
    (b"[carbonn]\n", "unknown settings section [carbonn]"),
    (b"# " + b"x" * (1 << 20) + b"\n", "expected at most 1 MiB"),
    (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),  # a RecursionError traceback (helper-87)
    (b'[warehouse]\nquery_memory_limit = "99999999999999999TB"\n', "more than any machine holds"),
    (b'[warehouse]\nmemory_limit = "5000000TB"\n', "more than any machine holds"),
], ids=["latin-1", "broken", "unknown-key", "unknown-section", "huge", "deep", "huge-query-memory", "huge-memory"])
def test_an_unreadable_file_is_one_line_naming_it(tmp_path, content, expected):
    path = tmp_path / "site.toml"
    path.write_bytes(content)
    with pytest.raises(SettingsError) as caught:
        load_settings(path, env={})
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_file_or_an_unknown_section_override_is_refused(tmp_path):
    with pytest.raises(SettingsError, match="settings file .*nowhere.toml does not exist"):
        load_settings(tmp_path / "nowhere.toml", env={})
    # a folder (the demo's var/demo, say) is named as one, not as missing
    with pytest.raises(SettingsError, match=r"settings file .* is a folder; give the TOML file in it"):
        load_settings(tmp_path, env={})
    with pytest.raises(SettingsError, match="JOULEHOUSE_CARBN__REGION: unknown settings section 'carbn'"):
        load_settings(env={"JOULEHOUSE_CARBN__REGION": "FR"})
    # Variables of the project that are not settings (no section) are left alone.
    assert load_settings(env={"JOULEHOUSE_CONFIG": "x.toml", "JOULEHOUSE_DAG_RETRIES": "0"}) == Settings()


def test_a_bad_setting_stops_the_daily_run_before_it_writes_anything(tmp_path):
    """Before: validity_hours = -1 failed only at the export, after the day's tables were written."""
    from joulehouse import daily

    db = tmp_path / "warehouse.duckdb"
    config = tmp_path / "site.toml"
    config.write_text(f'[warehouse]\ndb_path = "{db}"\n[lake]\npath = "{tmp_path / "lake"}"\n'
                      "[export]\nvalidity_hours = -1\n")
    with pytest.raises(SettingsError, match=r"\[export\].validity_hours = -1"):
        daily.build_warehouse(dt.date(2026, 6, 11).isoformat(), str(config))
    assert not db.exists()


def _number_fields():
    """(section, key, TOML text with a boolean for it) of every number setting of every section."""
    defaults = Settings()
    for name in Settings.model_fields:
        values = getattr(defaults, name)
        for key in type(values).__pydantic_fields__:
            default = getattr(values, key)
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                yield name, key, f"[{name}]\n{key} = true\n"
            elif isinstance(default, tuple) and default and all(isinstance(v, float) for v in default):
                yield name, key, f"[{name}]\n{key} = [true, 1.5]\n"


@pytest.mark.parametrize(("section", "key", "text"), list(_number_fields()),
                         ids=[f"{s}.{k}" for s, k, _ in _number_fields()])
def test_a_boolean_for_a_number_in_the_file_is_refused_naming_the_key(tmp_path, section, key, text):
    """pydantic's lax mode took `interval_s = true` as 1 s and `threads = false` as 0."""
    path = tmp_path / "site.toml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_settings(path, env={})
    message = str(caught.value)
    assert message.startswith(f"[{section}].{key}") and f"(in {path}): input should be a number, not the boolean true" \
        in message and "\n" not in message


def test_the_same_key_as_a_number_or_as_text_from_the_environment_is_taken(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text("[collector]\ninterval_s = 2\n[tco]\ntariff_tier = 1\n[models]\nactivity_hold_grid_s = [0, 1.5]\n"
                    "[warehouse]\ncompact_lake = false\n")  # a boolean setting still takes a boolean
    settings = load_settings(path, env={})
    assert (settings.collector.interval_s, settings.tco.tariff_tier, settings.models.activity_hold_grid_s,
            settings.warehouse.compact_lake) == (2.0, 1, (0.0, 1.5), False)
    settings = load_settings(path, env={"JOULEHOUSE_COLLECTOR__INTERVAL_S": "5", "JOULEHOUSE_TCO__TARIFF_TIER": "3",
                                        "JOULEHOUSE_MODELS__ACTIVITY_HOLD_GRID_S": "0,2"})
    assert (settings.collector.interval_s, settings.tco.tariff_tier, settings.models.activity_hold_grid_s) == (5.0, 3, (0.0, 2.0))
    with pytest.raises(SettingsError, match=r"^\[collector\].interval_s = 'true' \(from JOULEHOUSE_COLLECTOR__INTERVAL_S\)"):
        load_settings(path, env={"JOULEHOUSE_COLLECTOR__INTERVAL_S": "true"})


def test_a_boolean_for_a_number_is_refused_in_code_too():
    from joulehouse.collectors.settings import CollectorSettings, replace_fields

    with pytest.raises(SettingsError, match=r"^CollectorSettings.roll_max_rows = True: input should be a number"):
        replace_fields(CollectorSettings(), roll_max_rows=True)


def test_a_time_zone_too_long_for_a_file_name_is_refused_not_a_traceback():
    """zoneinfo looks a zone up as a file: a 300-character name raised OSError, a traceback from
    every command that reads the settings, where 'Mars/Olympus' got its one-line refusal."""
    with pytest.raises(SettingsError) as caught:
        load_settings(env={"JOULEHOUSE_TCO__TARIFF_TIMEZONE": "x" * 300})
    assert "[tco].tariff_timezone" in str(caught.value) and "is not an IANA time zone" in str(caught.value)
