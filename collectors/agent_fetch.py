"""Fetching the node agent's config (`joulehouse agent run` polls it, `agent fetch` checks it):
a file path, an http(s)/file URL, or an fsspec URL (s3://...). A location that says there is no
config (file gone, HTTP 404/410) answers None, which the loop reads as a revocation; one that
cannot be read raises ConfigFetchError (not a revocation: the settings in force stay); a document
over MAX_CONFIG_BYTES (16 MiB) is refused before it is read whole.
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable

from joulehouse.collectors.config_contract import MAX_CONFIG_BYTES
from joulehouse.collectors.input_file import open_regular, regular_file


class ConfigFetchError(OSError):
    """The config location could not be read (network error, permission...); not a revocation."""


class ConfigTooLarge(ConfigFetchError):
    """The location serves more than MAX_CONFIG_BYTES; refused before it was read whole."""


def fetch_config(location: str, timeout_s: float = 10.0, max_bytes: int = MAX_CONFIG_BYTES) -> bytes | None:
    """The document's bytes, or None when the location says there is no config (revoked).
    `location`: a file, an http(s) URL, or any fsspec URL such as s3://bucket/config/... (where
    [export] publish_url puts it; the backend package, e.g. s3fs, installed). At most `max_bytes`
    are read: a larger document raises ConfigTooLarge (a declared size is checked first)."""
    if location[:7].lower() == "file://":
        # through the path's checks: urlopen opens a file:// FIFO with no timeout, and the agent
        # then waited on it for good, caps outliving their config's expiry
        parsed = urllib.parse.urlsplit(location)
        if parsed.netloc not in ("", "localhost"):
            raise ConfigFetchError(f"config URL {location}: a file:// URL names a file of this machine "
                                   f"(host {parsed.netloc!r})")
        location = urllib.request.url2pathname(parsed.path)
    if "://" not in location:
        if os.path.lexists(location):  # a FIFO would block the open, a device never end: refused first
            regular_file(location, "config file", ConfigFetchError)
        try:
            # checked again on what was opened: a FIFO swapped in after the check above
            with open(open_regular(location, "config file", ConfigFetchError, missing_raises=True), "rb") as fh:
                _check_size(location, os.fstat(fh.fileno()).st_size, max_bytes)
                return _read_at_most(location, fh.read, max_bytes)
        except FileNotFoundError:
            return None
        except ConfigFetchError:
            raise
        except OSError as exc:
            raise ConfigFetchError(f"cannot read config file {location}: {exc}") from None
    if location.split("://", 1)[0].lower() not in ("http", "https"):
        return _fetch_fsspec(location, max_bytes)
    deadline = _Deadline(timeout_s)
    try:
        with deadline, deadline.opener.open(location, timeout=timeout_s) as response:
            declared = response.headers.get("Content-Length", "") if response.headers else ""
            _check_size(location, int(declared) if declared.isdigit() else None, max_bytes)
            data = _read_at_most(location, _read_before(location, response, time.monotonic() + timeout_s), max_bytes)
        if deadline.fired:  # headers cut short read as complete ones: what came is not the document
            raise ConfigFetchError(deadline.late(location))
        return data
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410) and not deadline.fired:
            return None
        raise ConfigFetchError(deadline.late(location) if deadline.fired else
                               f"config URL {location} answered HTTP {exc.code}") from None
    except ConfigFetchError:
        raise
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        if deadline.fired:
            raise ConfigFetchError(deadline.late(location)) from None
        raise ConfigFetchError(f"cannot fetch config URL {location}: {exc}") from None


class _Deadline:
    """One deadline for the whole request: connect, status line, headers and body. The socket's
    timeout bounds each wait only, so a server dripping a header byte every half second held the
    fetch (and the agent loop, and the expiry of the config in force) for good. At the deadline
    the request's sockets are shut down, which ends whatever read waits on them."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s, self.fired = timeout_s, False
        self._connections: list[http.client.HTTPConnection] = []
        self._timer: threading.Timer | None = None
        captured = self._connections

        def capturing(cls):
            def make(host, **kwargs):
                captured.append(cls(host, **kwargs))
                return captured[-1]
            return make

        class Http(urllib.request.HTTPHandler):
            def http_open(self, req):
                return self.do_open(capturing(http.client.HTTPConnection), req)

        class Https(urllib.request.HTTPSHandler):
            def https_open(self, req):
                return self.do_open(capturing(http.client.HTTPSConnection), req, context=self._context)

        self.opener = urllib.request.build_opener(Http, Https)

    def __enter__(self) -> "_Deadline":
        self._timer = threading.Timer(self.timeout_s, self._shut)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def late(self, location: str) -> str:
        return (f"config URL {location} did not answer in time: nothing whole after the fetch's {self.timeout_s:g} s "
                "timeout; the server or a proxy is sending too slowly")

    def _shut(self) -> None:
        self.fired = True
        for connection in self._connections:
            try:
                if connection.sock is not None:
                    connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: nothing waits on it


def _read_before(location: str, response, deadline: float) -> Callable[[int], bytes]:
    """`read(n)` of the response that gives up at `deadline` (monotonic s). The socket's timeout
    bounds each wait, not the whole body: a server (or proxy) sending a byte a second kept the
    agent on one fetch for good, so caps outlived their config's expiry."""

    read_some = getattr(response, "read1", response.read)  # read1: what has arrived, not n bytes

    def read(n_bytes: int) -> bytes:
        chunks, size = [], 0
        while size < n_bytes:
            if time.monotonic() > deadline:
                raise ConfigFetchError(f"config URL {location} did not arrive in time: {size} bytes after the "
                                       "fetch's timeout; the server or a proxy is sending too slowly")
            chunk = read_some(min(65536, n_bytes - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    return read


def _check_size(location: str, size: int | None, max_bytes: int) -> None:
    """Refuse a document whose declared size is over the limit, before reading any of it."""
    if size is not None and size > max_bytes:
        raise ConfigTooLarge(f"config at {location} is {size} bytes, over the {_size_text(max_bytes)} limit; "
                             "refused unread")


def _read_at_most(location: str, read: Callable[[int], bytes], max_bytes: int) -> bytes:
    """`read(max_bytes + 1)`; more than `max_bytes` (a size not declared, or declared wrong) is refused."""
    data = read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigTooLarge(f"config at {location} is more than {max_bytes} bytes, over the "
                             f"{_size_text(max_bytes)} limit; refused")
    return data


def _size_text(n_bytes: int) -> str:
    return f"{n_bytes >> 20} MiB" if n_bytes >= 1 << 20 and n_bytes % (1 << 20) == 0 else f"{n_bytes} bytes"


def _fetch_fsspec(location: str, max_bytes: int) -> bytes | None:
    from joulehouse.collectors import lakefs

    try:
        fs = lakefs.filesystem(location)
        _check_size(location, fs.size(location), max_bytes)
        return _read_at_most(location, lambda n: fs.cat_file(location, start=0, end=n), max_bytes)
    except FileNotFoundError:
        return None
    except ConfigFetchError:
        raise
    except ImportError as exc:
        raise ConfigFetchError(f"cannot fetch config URL {location}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the backend's errors (botocore, aiohttp...): all mean "not now"
        raise ConfigFetchError(f"cannot fetch config URL {location}: {type(exc).__name__}: {exc}") from None
