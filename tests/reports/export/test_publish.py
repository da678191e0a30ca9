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
