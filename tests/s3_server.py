"""A local S3 endpoint for tests: moto's server on 127.0.0.1 on a free port, with the
environment set so fsspec/s3fs (and so the writer, DuckDB and Spark readers) talk to it."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_s3(bucket: str) -> Iterator[str]:
    """Start moto's S3 server, point s3fs at it (dummy credentials), create `bucket`;
    yields the endpoint URL. Skips the test when moto or s3fs is not installed."""
    server_mod = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                            "AWS_ENDPOINT_URL": endpoint}.items():
            mp.setenv(name, value)
        # A cached S3FileSystem would keep talking to an earlier test's endpoint.
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            s3fs.S3FileSystem().mkdir(bucket)
            yield endpoint
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()
