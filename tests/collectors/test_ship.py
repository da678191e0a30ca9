"""Shipping the node lake to the central lake: every finished file once, nothing else, resumable."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest
import typer
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem
from typer.testing import CliRunner

from joulehouse.collectors.ship import Manifest, Shipper, ShipError, finished_files, ship_lake
from joulehouse.collectors.sim.simulate import simulate_fleet
from joulehouse.cli.ship import register


@pytest.fixture(scope="module")
def node_lake(tmp_path_factory) -> Path:
    """A small real lake (2 hosts x 8 GPUs, one day at 60 s) plus what must never be shipped."""
    lake = tmp_path_factory.mktemp("node") / "lake"
    simulate_fleet(lake, gpus=16, days=1, start=dt.date(2026, 1, 5), interval_s=60.0, seed=3)
    some_partition = next(lake.rglob("*.parquet")).parent
    (some_partition / ".part-0000-abc.parquet.tmp").write_bytes(b"half a file")
    (lake / "spool").mkdir()
    (lake / "spool" / "gpu_samples-0001.arrows").write_bytes(b"spool segment")
    return lake


def _copy_lake(src: Path, dst: Path) -> Path:
    for f in src.rglob("*"):
        if f.is_file():
            target = dst / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.read_bytes())
    return dst


def _dest_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _lake_files(lake: Path) -> dict[str, bytes]:
    return {p.relative_to(lake).as_posix(): p.read_bytes() for p in finished_files(lake)}


def test_folder_destination_gets_every_finished_file_with_its_layout(node_lake, tmp_path):
    central = tmp_path / "central"
    report = ship_lake(node_lake, str(central), tmp_path / "manifest.jsonl")
    expected = _lake_files(node_lake)
    assert len(expected) >= 4  # gpu_samples, node_samples, facility, jobs at least
    assert _dest_files(central) == expected  # same bytes, same paths, no tmp, no spool
    assert len(report.shipped) == len(expected)
    for f in central.rglob("*.parquet"):
        pq.read_table(f)
    again = ship_lake(node_lake, str(central), tmp_path / "manifest.jsonl")
    assert again.shipped == [] and again.skipped == len(expected)


def test_manifest_records_size_and_sha256_of_what_was_sent(node_lake, tmp_path):
    manifest = tmp_path / "m.jsonl"
    ship_lake(node_lake, str(tmp_path / "central"), manifest)
    entries = Manifest(manifest).load(f"file://{tmp_path / 'central'}")
    assert set(entries) == set(_lake_files(node_lake))
    for rel, entry in entries.items():
        data = (node_lake / rel).read_bytes()
        assert entry.bytes == len(data) and entry.sha256 == hashlib.sha256(data).hexdigest()


class CrashingFs(LocalFileSystem):
    """A local filesystem that 'crashes' (raises) at a chosen step of the Nth file."""

    def __init__(self, crash_at: str, nth: int):
        super().__init__()
        self.crash_at, self.nth, self.opened, self.moved = crash_at, nth, 0, 0

    def open(self, path, mode="rb", **kwargs):
        f = super().open(path, mode, **kwargs)
        if "w" in mode:
            self.opened += 1
            if self.crash_at == "mid-copy" and self.opened == self.nth:
                real_write = f.write

                def half_write(data):
                    real_write(data[: len(data) // 2])
                    raise KeyboardInterrupt("crash in the middle of a copy")

                f.write = half_write
        return f

    def mv(self, path1, path2, **kwargs):
        self.moved += 1
        if self.crash_at == "before-rename" and self.moved == self.nth:
            raise KeyboardInterrupt("crash after the upload, before the rename")
        super().mv(path1, path2, **kwargs)
        if self.crash_at == "before-record" and self.moved == self.nth:
            raise KeyboardInterrupt("crash after the rename, before the manifest line")


@pytest.mark.parametrize("crash_at", ["mid-copy", "before-rename", "before-record"])
def test_a_crash_then_a_rerun_ships_every_file_exactly_once(node_lake, tmp_path, crash_at):
    central, manifest = tmp_path / "central", tmp_path / "m.jsonl"
    expected = _lake_files(node_lake)
    with pytest.raises(KeyboardInterrupt):
        Shipper(node_lake, str(central), manifest, fs=CrashingFs(crash_at, nth=3), root=str(central)).run()
    recorded_before = Manifest(manifest).load(f"file://{central}")
    assert len(recorded_before) == 2  # the third file was in flight: not recorded
    partial = {k for k in _dest_files(central) if k.endswith(".parquet")}
    assert partial <= set(expected)  # a reader never sees a half file under a final name
    rerun = ship_lake(node_lake, str(central), manifest)
    assert len(rerun.shipped) + len(recorded_before) == len(expected)
    assert {e.path for e in rerun.shipped}.isdisjoint(recorded_before)
    shipped = {k: v for k, v in _dest_files(central).items() if not k.endswith(".tmp")}
    assert shipped == expected
    lines = manifest.read_text().splitlines()
    assert len(lines) == len(expected)  # one record per file: nothing twice


def test_torn_manifest_line_sends_that_file_again_and_only_that(node_lake, tmp_path):
    central, manifest = tmp_path / "central", tmp_path / "m.jsonl"
    ship_lake(node_lake, str(central), manifest)
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(lines[:-1]) + lines[-1][:25])  # the crash cut the last append
    rerun = ship_lake(node_lake, str(central), manifest)
    assert len(rerun.shipped) == 1
    assert len(Manifest(manifest).load(f"file://{central}")) == len(_lake_files(node_lake))


def test_a_file_changed_after_shipping_replaces_its_copy(node_lake, tmp_path):
    lake = _copy_lake(node_lake, tmp_path / "lake")
    central, manifest = tmp_path / "central", tmp_path / "m.jsonl"
    ship_lake(lake, str(central), manifest)
    victim = finished_files(lake)[0]
    table = pq.read_table(victim)
    pq.write_table(table.slice(0, 1), victim)  # e.g. a DCGM range redone after a crash
    new_file = victim.with_name("part-9999999999999999-new.parquet")
    pq.write_table(table.slice(1, 1), new_file)
    report = ship_lake(lake, str(central), manifest)
    assert report.reshipped_changed == 1 and len(report.shipped) == 2
    assert _dest_files(central) == _lake_files(lake)


@pytest.mark.parametrize("rename", [True, False], ids=["tmp-then-rename", "single-put"])
def test_memory_fsspec_destination_with_the_same_code(node_lake, tmp_path, rename):
    url = f"memory://central-{uuid.uuid4().hex[:8]}"
    fs, root = fsspec.core.url_to_fs(url)
    assert isinstance(fs, MemoryFileSystem)
    shipper = Shipper(node_lake, url, tmp_path / "m.jsonl", rename=rename)
    report = shipper.run()
    expected = _lake_files(node_lake)
    got = {p[len(root) + 1:]: fs.cat_file(p) for p in fs.find(root)}
    assert got == expected and len(report.shipped) == len(expected)
    assert Shipper(node_lake, url, tmp_path / "m.jsonl").run().shipped == []


def test_a_short_copy_is_refused_and_removed(node_lake, tmp_path):
    class ShortFs(MemoryFileSystem):
        def size(self, path):
            return super().size(path) - 1

    fs = ShortFs()
    root = f"/short-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ShipError, match="expected"):
        Shipper(node_lake, "memory:/" + root, tmp_path / "m.jsonl", fs=fs, root=root).run()
    assert not fs.find(root)  # nothing under a final name
    assert not (tmp_path / "m.jsonl").exists()


def test_cli_ships_and_reports_bad_input(node_lake, tmp_path):
    app = typer.Typer()
    register(app)
    central = tmp_path / "central"
    out = CliRunner().invoke(app, ["--lake", str(node_lake), "--to", str(central),
                                   "--manifest", str(tmp_path / "m.jsonl")])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"shipped {len(_lake_files(node_lake))} files")  # no blank line before it
    assert _dest_files(central) == _lake_files(node_lake)
    missing = CliRunner().invoke(app, ["--lake", str(tmp_path / "nope"), "--to", str(central)])
    assert missing.exit_code == 2 and "no such folder" in missing.output
    bad_url = CliRunner().invoke(app, ["--lake", str(node_lake), "--to", "nosuchproto://x"])
    assert bad_url.exit_code == 2 and "nosuchproto" in bad_url.output


@pytest.mark.parametrize("where", [".", "central", "gpu_samples"])
def test_shipping_a_lake_onto_itself_or_into_itself_is_refused(node_lake, tmp_path, where):
    """`ship --to` the --lake folder said "shipped 4 files" and recorded them all as shipped."""
    app = typer.Typer()
    register(app)
    before = sorted(p for p in node_lake.rglob("*") if p.is_file())
    out = CliRunner().invoke(app, ["--lake", str(node_lake), "--to", str(node_lake / where),
                                   "--manifest", str(tmp_path / "m.jsonl")])
    assert out.exit_code == 2 and "the node's lake" in out.output and "give the central lake" in out.output
    assert sorted(p for p in node_lake.rglob("*") if p.is_file()) == before and not (tmp_path / "m.jsonl").exists()


def test_a_file_replaced_during_its_copy_is_shipped_again(node_lake, tmp_path, monkeypatch):
    """The DCGM source rewrites a partition (temp file + rename) while ship copies it: the manifest
    records the version that was copied, so the next run sees the new one as changed and ships it
    (recording the new file's size and time made it look shipped for good)."""
    from joulehouse.collectors import ship as ship_module

    lake = _copy_lake(node_lake, tmp_path / "lake")
    victim = sorted(finished_files(lake))[0]
    real_copy = ship_module.Shipper._copy

    def copy_then_replace(self, src, target):
        result = real_copy(self, src, target)
        if Path(src) == victim and not (tmp_path / "replaced").exists():
            (tmp_path / "replaced").touch()
            new = victim.with_name(".rewrite.tmp")
            new.write_bytes(victim.read_bytes() + b"\0" * 7)  # the rewritten partition: different bytes
            new.replace(victim)
        return result

    monkeypatch.setattr(ship_module.Shipper, "_copy", copy_then_replace)
    central = tmp_path / "central"
    ship_lake(lake, str(central), tmp_path / "manifest.jsonl")
    again = ship_lake(lake, str(central), tmp_path / "manifest.jsonl")
    rel = victim.relative_to(lake).as_posix()
    assert [e.path for e in again.shipped] == [rel]
    assert (central / rel).read_bytes() == victim.read_bytes()


def test_the_new_partition_folders_at_a_local_destination_are_made_durable(node_lake, tmp_path, monkeypatch):
    """A power cut after ship recorded a file must not take it away: the date= and host= folders
    ship creates are fsynced into their parents, as the node's own writer does."""
    from joulehouse.collectors import lakefs

    synced: list[Path] = []
    real = lakefs.fsync_dir
    monkeypatch.setattr(lakefs, "fsync_dir", lambda folder: (synced.append(Path(folder)), real(folder)))
    central = tmp_path / "central"
    report = ship_lake(node_lake, str(central), tmp_path / "manifest.jsonl")
    assert report.shipped
    for entry in report.shipped:
        host_dir = (central / entry.path).parent
        assert host_dir.parent in synced and host_dir.parent.parent in synced, entry.path


class BackendError(Exception):
    """Stands for an object store SDK's own error: botocore's NoCredentialsError and
    EndpointConnectionError are not OSError."""


class FailingObjectStore(MemoryFileSystem):
    """A memory filesystem whose compaction-ledger read ("ledger") or uploads ("write") fail as
    an object store without credentials does; `fail_on = None` heals it."""

    def __init__(self, fail_on: str | None):
        super().__init__()
        self.fail_on = fail_on

    def open(self, path, mode="rb", **kwargs):
        ledger = path.endswith("_compacted.jsonl") and "r" in mode
        if (self.fail_on == "ledger" and ledger) or (self.fail_on == "write" and "w" in mode):
            raise BackendError("Unable to locate credentials\n(checked: env, config file)")
        return super().open(path, mode, **kwargs)


@pytest.mark.parametrize("fail_on", ["ledger", "write"])
def test_an_object_store_error_is_one_ship_error_and_the_next_run_sends_every_file(node_lake, tmp_path, fail_on):
    """An SDK error (not an OSError) went up as a traceback; it is a one-line ShipError, nothing is
    recorded for the file it stopped on, and the run after the store heals sends each file once."""
    fs, root = FailingObjectStore(fail_on), f"/objects-{uuid.uuid4().hex[:8]}"
    manifest, dest = tmp_path / "m.jsonl", f"memory:/{root}"
    with pytest.raises(ShipError) as caught:
        Shipper(node_lake, dest, manifest, fs=fs, root=root, rename=False).run()
    message = str(caught.value)
    assert "BackendError: Unable to locate credentials (checked: env, config file)" in message
    assert "\n" not in message and dest in message
    assert Manifest(manifest).load(dest) == {} and not fs.find(root)
    fs.fail_on = None
    report = Shipper(node_lake, dest, manifest, fs=fs, root=root, rename=False).run()
    expected = _lake_files(node_lake)
    assert len(report.shipped) == len(expected)
    assert {p[len(root) + 1:]: fs.cat_file(p) for p in fs.find(root)} == expected


@pytest.mark.parametrize("case", ["no credentials", "unreachable endpoint"])
def test_cli_object_store_errors_are_one_line_and_raise_the_failed_metric(node_lake, tmp_path, monkeypatch, case):
    """`ship --to s3://...` with no credentials, or an endpoint nothing answers, printed a
    100-line traceback and never wrote its metrics, so joulehouse_ship_failed never rose."""
    s3fs = pytest.importorskip("s3fs")
    from s3_server import _free_port

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no wait on an instance metadata endpoint
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # botocore retries a refused connection 4 more times with backoff: one try keeps this test fast
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    if case == "unreachable endpoint":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")  # closed: nothing listens
    s3fs.S3FileSystem.clear_instance_cache()  # a cached instance keeps an earlier test's endpoint
    app = typer.Typer()
    register(app)
    textfile, manifest = tmp_path / "ship.prom", tmp_path / "m.jsonl"
    try:
        out = CliRunner().invoke(app, ["--lake", str(node_lake), "--to", "s3://bucket/lake", "--manifest",
                                       str(manifest), "--metrics-textfile", str(textfile)])
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert out.exit_code == 1 and isinstance(out.exception, SystemExit), out.exception
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in out.output, out.output
    assert ("NoCredentialsError" if case == "no credentials" else "EndpointConnectionError") in errors[0]
    assert "s3://bucket/lake" in errors[0]
    assert "joulehouse_ship_failed 1.0" in textfile.read_text()
    assert Manifest(manifest).load("s3://bucket/lake") == {}
