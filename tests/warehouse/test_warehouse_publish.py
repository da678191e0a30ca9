"""Publishing the warehouse by rename: a failed step leaves the published file as it was, writers
queue on the lock and never lose each other's work, a reader's open file is never written."""

from __future__ import annotations

import threading

import duckdb
import pytest

from joulehouse.warehouse.db import WarehouseError
from joulehouse.warehouse.publish import published_connection, writer_folder, writer_lock


def _published_table(tmp_path, create: str = "CREATE TABLE t AS SELECT 1 AS n"):
    """A published warehouse whose table t holds n = 1 (or what `create` makes)."""
    db = tmp_path / "warehouse.duckdb"
    with published_connection(db, None) as con:
        con.execute(create)
    return db


def _rows(db) -> list:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT n FROM t ORDER BY n").fetchall()]
    finally:
        con.close()


def test_a_step_publishes_its_work_and_a_failed_one_publishes_nothing(tmp_path):
    db = _published_table(tmp_path)
    with pytest.raises(ZeroDivisionError):
        with published_connection(db, None) as con:
            con.execute("INSERT INTO t VALUES (2)")
            raise ZeroDivisionError
    assert _rows(db) == [1]
    with pytest.raises(LookupError):
        with published_connection(db, None, publish_on=(LookupError,)) as con:
            con.execute("INSERT INTO t VALUES (3)")
            raise LookupError("stored, then failed the day")
    assert _rows(db) == [1, 3]
    assert [p.name for p in writer_folder(db).iterdir()] == ["lock"]  # no copy left behind
    assert not (tmp_path / "warehouse.duckdb.wal").exists()


def test_a_reader_holding_the_file_keeps_its_answer_and_does_not_block_the_writer(tmp_path):
    db = _published_table(tmp_path)
    reader = duckdb.connect(str(db), read_only=True)
    try:
        with published_connection(db, None) as con:
            con.execute("INSERT INTO t VALUES (2)")
        assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    finally:
        reader.close()
    assert _rows(db) == [1, 2]


def test_the_readmes_notebook_pattern_sees_the_new_day_only_after_closing(tmp_path):
    """README, "Querying while the DAG runs": a notebook that rebinds `con = duckdb.connect(...)`
    over a live connection keeps reading the replaced file (DuckDB reuses the open database of a
    path); closing first is what the README says, and what reads the published one."""
    db = _published_table(tmp_path)
    con = duckdb.connect(str(db), read_only=True)
    with published_connection(db, None) as writer:
        writer.execute("INSERT INTO t VALUES (2)")
    rebound = duckdb.connect(str(db), read_only=True)
    assert rebound.execute("SELECT count(*) FROM t").fetchone()[0] == 1, "still the old file"
    rebound.close()
    con.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    finally:
        con.close()


def test_our_read_only_open_reads_the_published_file_while_the_process_holds_the_old_one(tmp_path):
    """A notebook holding the warehouse, then running the DAG's steps in the same kernel: DuckDB
    handed every read-only step the database it already held, the replaced file, and the warning
    checks validated the old day."""
    from joulehouse.warehouse.db import connect

    db = _published_table(tmp_path)
    held = duckdb.connect(str(db), read_only=True)
    try:
        with published_connection(db, None) as writer:
            writer.execute("INSERT INTO t VALUES (2)")
        ours = connect(db, None, read_only=True)
        try:
            assert ours.execute("SELECT count(*) FROM t").fetchone()[0] == 2
            assert ours.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                                ).fetchone()[0] == str(db)
        finally:
            ours.close()
        assert held.execute("SELECT count(*) FROM t").fetchone()[0] == 1  # the holder keeps its answer
    finally:
        held.close()


def test_writers_queue_on_the_lock_and_neither_loses_its_rows(tmp_path):
    db = _published_table(tmp_path, "CREATE TABLE t (n INTEGER)")
    inside, release = threading.Event(), threading.Event()

    def slow_writer():
        with published_connection(db, None) as con:
            con.execute("INSERT INTO t VALUES (1)")
            inside.set()
            release.wait(10)

    first = threading.Thread(target=slow_writer)
    first.start()
    inside.wait(10)
    with pytest.raises(WarehouseError, match=r"another writer holds .*lock \(pid \d+ since"):
        with writer_lock(db, wait_s=0.3):
            pass
    second = threading.Thread(target=lambda: _insert(db, 2))
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert _rows(db) == [1, 2]


def _insert(db, n: int) -> None:
    with published_connection(db, None) as con:
        con.execute("INSERT INTO t VALUES (?)", [n])


def test_the_copy_of_a_killed_writer_is_removed_by_the_next_one(tmp_path):
    """An operator's trial: `kill -9` during a build left warehouse-<pid>-<id>.duckdb (the size of
    the warehouse) and its WAL in .writer/, and no later run removed them."""
    import signal
    import subprocess
    import sys

    db = _published_table(tmp_path)
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from joulehouse.warehouse.publish import published_connection\n"
        f"with published_connection({str(db)!r}, None) as con:\n"
        "    con.execute('INSERT INTO t SELECT range FROM range(100000)')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = sorted(p.name for p in writer_folder(db).iterdir() if p.name != "lock")
    assert left and all(name.startswith("warehouse-") for name in left), left  # the dead writer's copy
    assert _rows(db) == [1]  # never published
    spill = writer_folder(db) / f"{left[0].removesuffix('.wal')}.tmp"  # DuckDB spills beside its file
    spill.mkdir()
    (spill / "duckdb_temp_storage-0.tmp").write_bytes(b"x" * 1024)
    _insert(db, 2)
    assert [p.name for p in writer_folder(db).iterdir()] == ["lock"]
    assert _rows(db) == [1, 2]


def test_a_wal_left_by_a_writer_in_place_is_kept_and_a_reader_holding_the_file_does_not_stop_the_run(tmp_path):
    """Someone opened the file read-write and died, leaving warehouse.duckdb.wal; an analyst then
    holds the file read-only in another process. The next step opened the published file writable
    to fold the WAL in, and failed on the analyst's lock. Its committed row is kept, and the run goes on."""
    import subprocess
    import sys

    db = _published_table(tmp_path)
    died = subprocess.run([sys.executable, "-c", (
        "import duckdb, os\n"
        f"con = duckdb.connect({str(db)!r})\n"
        "con.execute('INSERT INTO t VALUES (7)')\n"
        "os._exit(0)\n")], capture_output=True, text=True)
    assert died.returncode == 0, died.stderr
    assert (tmp_path / "warehouse.duckdb.wal").exists()
    reader = subprocess.Popen([sys.executable, "-c", (
        "import duckdb, sys, time\n"
        f"con = duckdb.connect({str(db)!r}, read_only=True)\n"
        "print(con.execute('SELECT count(*) FROM t').fetchone()[0], flush=True)\n"
        "sys.stdin.readline()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "2"  # the reader replays the WAL too
        _insert(db, 3)
    finally:
        reader.communicate("\n", timeout=30)
    assert _rows(db) == [1, 3, 7]
    assert not (tmp_path / "warehouse.duckdb.wal").exists()


def test_a_run_dying_right_after_its_publish_leaves_a_warehouse_that_opens(tmp_path, monkeypatch):
    """The leftover WAL was removed after the rename: a writer dying between the two left it beside
    the new file, and every open then failed ('WAL checkpoint iteration does not match')."""
    import subprocess
    import sys

    from joulehouse.warehouse import publish

    db = _published_table(tmp_path)
    subprocess.run([sys.executable, "-c", (
        "import duckdb, os\n"
        f"con = duckdb.connect({str(db)!r})\n"
        "con.execute('INSERT INTO t VALUES (7)')\n"
        "os._exit(0)\n")], check=True)
    real_replace = publish.os.replace

    def replace_then_die(src, dst):
        real_replace(src, dst)
        raise KeyboardInterrupt  # killed right after the rename

    monkeypatch.setattr(publish.os, "replace", replace_then_die)
    with pytest.raises(KeyboardInterrupt):
        _insert(db, 3)
    monkeypatch.setattr(publish.os, "replace", real_replace)
    assert _rows(db) == [1, 3, 7]
    _insert(db, 4)
    assert _rows(db) == [1, 3, 4, 7]


def test_two_files_named_alike_cannot_share_a_home_and_a_file_without_an_extension_is_refused(tmp_path):
    """wh.duckdb and a copy wh.bak both kept their readings in wh/, and a build of the copy deleted
    the other's readings as not its own; a file with no extension was its own home folder and could
    never be published (review, helper-91)."""
    import shutil

    db = _published_table(tmp_path)
    shutil.copy(db, tmp_path / "warehouse.bak")
    with pytest.raises(WarehouseError, match=r"holds the readings of warehouse\.duckdb; two warehouse files named alike"):
        with published_connection(tmp_path / "warehouse.bak", None):
            pass
    with published_connection(db, None) as con:  # its own still publishes
        con.execute("INSERT INTO t VALUES (2)")
    assert _rows(db) == [1, 2]
    with pytest.raises(WarehouseError, match="give the file an extension"):
        with published_connection(tmp_path / "bare", None):
            pass
    assert not (tmp_path / "bare").exists()


def test_a_writer_that_never_got_the_lock_does_not_claim_the_folder(tmp_path):
    """The folder's note was written before the writer lock was taken: a build of the copy
    wh.bak that waited behind the real writer and gave up had already named itself the owner (of a
    folder from before the note existed, or a fresh one), and every later build of the real file
    was refused."""
    from joulehouse.warehouse.publish import OWNER_NAME, home_folder, writer_lock

    db = _published_table(tmp_path)
    (home_folder(db) / OWNER_NAME).unlink()  # a warehouse from before the note
    with writer_lock(db):  # the real file's build is running
        with pytest.raises(WarehouseError, match="another writer holds"):
            with published_connection(tmp_path / "warehouse.bak", None, wait_s=0.2):
                pass
    with published_connection(db, None) as con:
        con.execute("INSERT INTO t VALUES (2)")
    assert _rows(db) == [1, 2]
    assert (home_folder(db) / OWNER_NAME).read_text(encoding="utf-8").strip() == db.name


def test_a_writer_killed_while_noting_the_owner_does_not_lock_the_warehouse_for_good(tmp_path):
    """The note was created, then written: a writer killed (or a disk full) in between left an
    empty note, and every later build was refused as 'the readings of ' nobody (review, helper-100)."""
    from joulehouse.warehouse.publish import OWNER_NAME, home_folder

    db = _published_table(tmp_path)
    (home_folder(db) / OWNER_NAME).write_text("", encoding="utf-8")  # what the kill left
    with published_connection(db, None) as con:
        con.execute("INSERT INTO t VALUES (2)")
    assert _rows(db) == [1, 2]
    assert (home_folder(db) / OWNER_NAME).read_text(encoding="utf-8") == db.name + "\n"
