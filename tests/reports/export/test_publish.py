"""Publishing the export where agents fetch it: whole file or nothing, folder or fsspec URL."""

from __future__ import annotations

import fsspec
import pytest

from joulehouse.reports.export.publish import PublishError, publish_config


def test_publish_to_a_folder_and_to_an_fsspec_url(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "recommended-config.json").write_bytes(b'{"body": {}, "signature": {}}')
    dest = publish_config(export, str(tmp_path / "www" / "config"))
    assert (tmp_path / "www" / "config" / "recommended-config.json").read_bytes() == b'{"body": {}, "signature": {}}'
    assert not list((tmp_path / "www" / "config").glob("*.tmp"))
    assert dest.endswith("recommended-config.json")

    url = publish_config(export, "memory://agents/site-a")
    assert url == "memory://agents/site-a/recommended-config.json"
    assert fsspec.filesystem("memory").cat("/agents/site-a/recommended-config.json") == b'{"body": {}, "signature": {}}'


def test_nothing_to_publish_is_a_clear_error(tmp_path):
    with pytest.raises(PublishError, match="does not exist"):
        publish_config(tmp_path, str(tmp_path / "out"))


def test_a_link_planted_at_a_temporary_name_is_not_written_through(tmp_path):
    """The copy went to a fixed `<final>.tmp`: another user of a shared web root planted a link
    there, and publishing overwrote the file it named and left the config a link to it (review,
    helper-85). A fresh exclusive name each time."""
    import os

    export, www = tmp_path / "export", tmp_path / "www"
    export.mkdir()
    www.mkdir()
    (export / "recommended-config.json").write_bytes(b'{"body": {}, "signature": {}}')
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA admin\n")
    os.symlink(victim, www / "recommended-config.json.tmp")
    publish_config(export, str(www))
    assert victim.read_text() == "ssh-ed25519 AAAA admin\n"
    published = www / "recommended-config.json"
    assert not published.is_symlink() and published.read_bytes() == b'{"body": {}, "signature": {}}'
    assert published.stat().st_mode & 0o777 == 0o644
