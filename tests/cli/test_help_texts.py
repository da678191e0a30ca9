"""What every command's rendered --help says: a settings section written as `[section]` survives
rich's markup, and a --config read through JOULEHOUSE_CONFIG says so (and is read)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from test_help import COMMANDS  # every command, as test_help walks them


# a settings section as the source writes it in a help string: `\\[tco]` (escaped) or `[tco]`
SECTION = re.compile(r"\\?\[([a-z_]+)\]")


def rendered_help(path) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def option_help(path, option: str) -> str:
    """The text of `option`'s rows in the rendered --help panel, box borders and wrapping removed."""
    rows = [line.strip("│ ") for line in rendered_help(path).splitlines()]
    start = next(i for i, row in enumerate(rows) if re.match(rf"(\* )?{re.escape(option)}(?![\w-])", row))
    block = [rows[start]]
    for row in rows[start + 1:]:
        if row.startswith(("-", "* -", "╰")) or not row:
            break
        block.append(row)
    return " ".join(" ".join(block).split())


def _sections(text: str | None) -> list[str]:
    return SECTION.findall(text or "")


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_settings_section_written_in_a_help_is_shown(path, command):
    """Rich read an unescaped `[warehouse]` as a markup tag and dropped it: `sql --help` showed
    "--db ... (default: the settings'  db_path)", `collect --help` "--spool-dir ... (default:
    spool_dir, ...)". Each option's own rows show the sections its help names; the command's text
    shows at least as many of each as its helps write."""
    visible = [p for p in command.params if not getattr(p, "hidden", False)]
    for param in visible:
        if param.param_type_name == "option" and _sections(param.help):
            shown = option_help(path, param.opts[0])
            lost = [name for name in _sections(param.help) if f"[{name}]" not in shown]
            assert not lost, f"{' '.join(path)} {param.opts[0]} lost {lost}: {shown!r} (write \\\\[{lost[0]}] in the source)"
    texts = [command.help, *(getattr(p, "help", None) for p in visible)]
    written = Counter(name for text in texts for name in _sections(text))
    text = rendered_help(path)
    lost = sorted(name for name, n in written.items() if text.count(f"[{name}]") < n)
    assert not lost, f"{' '.join(path)} --help lost {lost}"


def test_the_scan_finds_the_sections_the_helps_name():
    """The test above checks something: the helps that lost their section are among those scanned."""
    written = {" ".join(path): {(p.opts[0], name) for p in command.params for name in _sections(getattr(p, "help", None))}
               for path, command in COMMANDS}
    assert ("--db", "warehouse") in written["sql"] and ("--spool-dir", "collector") in written["collect"]
    assert ("--price-node", "tco") in written["tco estimate"] and ("--interval", "agent") in written["agent run"]


# the commands whose --config, when not given, is the file JOULEHOUSE_CONFIG names (cli.options.settings_file)
READS_JOULEHOUSE_CONFIG = (("settings",), ("carbon", "estimate"), ("tco", "estimate"), ("run",), ("sql",),
                           ("caps", "from-sweep"))


@pytest.mark.parametrize("path", READS_JOULEHOUSE_CONFIG, ids=[" ".join(p) for p in READS_JOULEHOUSE_CONFIG])
def test_config_help_names_the_environment_variable_it_falls_back_to(path):
    """`settings --config` said "default: none, the built-in defaults" and the estimates "(default:
    built-in)", while each reads the file JOULEHOUSE_CONFIG names first."""
    shown = option_help(path, "--config")
    assert "JOULEHOUSE_CONFIG" in shown, shown
    assert "default: built-in" not in shown and "default: none" not in shown, shown


@pytest.fixture
def priced_at_200(tmp_path):
    config = tmp_path / "site.toml"
    config.write_text("[tco]\nflat_price_usd_per_mwh = 200\n")
    return str(config)


ESTIMATE = ["tco", "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "1", "--format", "json"]


def test_tco_estimate_prices_with_the_file_joulehouse_config_names(priced_at_200):
    """What the help says is what it does: the site's flat price from the environment's file."""
    built_in = CliRunner().invoke(app, ESTIMATE, env={"JOULEHOUSE_CONFIG": ""})
    from_env = CliRunner().invoke(app, ESTIMATE, env={"JOULEHOUSE_CONFIG": priced_at_200})
    assert built_in.exit_code == 0 and from_env.exit_code == 0, (built_in.output, from_env.output)
    built_in, from_env = json.loads(built_in.stdout), json.loads(from_env.stdout)
    assert from_env["price_usd_per_mwh"] == 200 and built_in["price_usd_per_mwh"] != 200
    # the same energy priced at 200 USD/MWh: 1 MWh = 1000 kWh
    assert from_env["energy_cost_usd"] == pytest.approx(from_env["energy_kwh"] * 200 / 1000, rel=1e-3)
    assert from_env["total_cost_usd"] > built_in["total_cost_usd"]


def test_settings_prints_the_file_joulehouse_config_names(priced_at_200):
    shown = CliRunner().invoke(app, ["settings"], env={"JOULEHOUSE_CONFIG": priced_at_200})
    assert shown.exit_code == 0, shown.output
    assert re.search(r"^flat_price_usd_per_mwh = 200(\.0)?$", shown.stdout, re.M), shown.stdout


def test_cost_estimate_help_does_not_offer_an_embodied_default():
    """--gpu-model's help on `tco estimate` named "the embodied default", which prices nothing; the
    carbon estimate's does take the model's manufacturing footprint."""
    assert "embodied" not in option_help(("tco", "estimate"), "--gpu-model").lower()
    assert "--embodied-kgco2e-per-gpu" in option_help(("carbon", "estimate"), "--gpu-model")
