"""Put the signed recommended-config file where node agents fetch it (a folder or fsspec URL)."""

from __future__ import annotations

from pathlib import Path

import fsspec

from joulehouse.collectors import lakefs
from joulehouse.collectors.config_contract import CONFIG_NAME


class PublishError(OSError):
    """The export is missing, or the destination refused the copy."""


def publish_config(export_dir: str | Path, publish_url: str) -> str:
    """Copy `<export_dir>/recommended-config.json` to `<publish_url>/recommended-config.json`.

    A reader never sees half a file: on a filesystem the copy lands under a temporary name and is
    renamed; on an object store a single PUT is atomic. Returns the destination URL."""
    source = Path(export_dir) / CONFIG_NAME
    if not source.is_file():
        raise PublishError(f"no export to publish: {source} does not exist (run the daily DAG first)")
    data = source.read_bytes()
    fs, root = fsspec.core.url_to_fs(publish_url)
    fs.makedirs(root, exist_ok=True)
    final = f"{root.rstrip('/')}/{CONFIG_NAME}"
    try:
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if {"file", "local"} & set(protocols):
            # a fresh name made exclusively (mkstemp), never a fixed `<final>.tmp`: another user of
            # a shared web root could plant that as a link, and the DAG's user would write through it
            lakefs.write_file_atomically(final, data, 0o644)
        elif "memory" in protocols:
            tmp = f"{final}.tmp"
            fs.pipe_file(tmp, data)
            fs.mv(tmp, final)
        else:
            fs.pipe_file(final, data)
    except OSError as exc:
        raise PublishError(f"cannot publish {source} to {publish_url}: {exc}") from exc
    if fs.size(final) != len(data):
        raise PublishError(f"published {final} has {fs.size(final)} bytes, expected {len(data)}")
    return f"{publish_url.rstrip('/')}/{CONFIG_NAME}" if "://" in publish_url else str(Path(final))
