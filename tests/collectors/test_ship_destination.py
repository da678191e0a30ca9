"""`joulehouse ship --to`: a destination that carries a comment is refused before anything is sent.

systemd's EnvironmentFile takes a value up to the end of its line, a `# comment` after it too, and
the ship unit passes `--to ${JOULEHOUSE_SHIP_TO}` whole: `JOULEHOUSE_SHIP_TO=/srv/lake   # the NFS
mount` shipped every file into a new folder named `lake   # the NFS mount`, and an s3:// URL so
written into keys of that name, with no error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.cli.ship import register


@pytest.fixture()
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "node" / "lake"
    partition = root / "gpu_samples" / "date=2026-12-08" / "host=node-01"
    partition.mkdir(parents=True)
    pq.write_table(pa.table({"power_w": [250.0, 251.5]}), partition / "part-0001.parquet")
    return root


def _ship(lake: Path, to: str, manifest: Path):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["--lake", str(lake), "--to", to, "--manifest", str(manifest)])


@pytest.mark.parametrize("comment", ["        # the NFS mount", "\t# or a folder (an NFS mount) or file:///..."])
def test_a_destination_with_a_comment_from_an_environment_file_is_refused(lake, tmp_path, comment):
    central = tmp_path / "central"
    out = _ship(lake, f"{central}{comment}", tmp_path / "m.jsonl")
    assert out.exit_code == 2, out.output
    assert "comment" in out.output and "EnvironmentFile" in out.output
    assert [p.name for p in tmp_path.iterdir()] == ["node"]  # no folder made, no manifest written


@pytest.mark.parametrize("name, made_before", [("central lake #2", False), ("central # 2", True)])
def test_a_folder_named_with_a_hash_is_still_a_destination(lake, tmp_path, name, made_before):
    """A name that only looks like a comment ships where the folder is already there."""
    central = tmp_path / name
    if made_before:
        central.mkdir()
    out = _ship(lake, str(central), tmp_path / "m.jsonl")
    assert out.exit_code == 0, out.output
    assert (central / "gpu_samples" / "date=2026-12-08" / "host=node-01" / "part-0001.parquet").is_file()
