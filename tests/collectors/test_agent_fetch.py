"""Where node agents fetch the signed config from: a file, HTTP, or the object store that the
publish DAG writes it to ([export] publish_url = s3://...)."""

from __future__ import annotations

import pytest

from joulehouse.collectors.agent_loop import ConfigFetchError, fetch_config
from s3_server import local_s3


@pytest.mark.integration
@pytest.mark.slow
def test_an_agent_fetches_the_config_from_an_object_store_and_a_missing_one_is_revoked():
    with local_s3("fleet-config"):
        import s3fs

        url = "s3://fleet-config/config/recommended-config.json"
        s3fs.S3FileSystem().pipe_file(url, b'{"schema_version": 1}')
        assert fetch_config(url) == b'{"schema_version": 1}'
        assert fetch_config("s3://fleet-config/config/none.json") is None  # no config: revoked
    with pytest.raises(ConfigFetchError, match="cannot fetch config URL s3://fleet-config"):
        fetch_config(url)  # the store is gone: an error, never taken for a revocation


def test_a_file_location_and_a_missing_file(tmp_path):
    path = tmp_path / "recommended-config.json"
    path.write_bytes(b"{}")
    assert fetch_config(str(path)) == b"{}" and fetch_config(str(tmp_path / "none.json")) is None


def test_a_file_url_gets_the_checks_of_a_path(tmp_path):
    """urlopen opened a file:// FIFO with no timeout: the agent waited on it for good."""
    import os

    path = tmp_path / "recommended config.json"
    path.write_bytes(b"{}")
    assert fetch_config(path.as_uri()) == b"{}" and fetch_config((tmp_path / "none.json").as_uri()) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigFetchError, match="regular file"):
        fetch_config(fifo.as_uri())
    with pytest.raises(ConfigFetchError, match="names a file of this machine"):
        fetch_config("file://other-host/etc/passwd")


def test_a_server_sending_a_byte_at_a_time_is_given_up_at_the_timeout():
    """Each wait of the socket was bounded, not the body: a server trickling a byte a second kept
    `agent run` on one fetch for good, so caps outlived their config's expiry."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            while not stop.is_set():
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    outcome: list = []

    def fetch():
        try:
            fetch_config(f"http://127.0.0.1:{server.server_port}/c.json", timeout_s=0.5)
        except ConfigFetchError as exc:
            outcome.append(exc)

    try:
        worker = threading.Thread(target=fetch, daemon=True)
        worker.start()
        worker.join(timeout=30)  # a bound for the test only: it fails here if the fetch never ends
        assert not worker.is_alive() and outcome and "did not arrive in time" in str(outcome[0])
    finally:
        stop.set()
        server.shutdown()


def test_a_server_dripping_its_headers_is_given_up_at_the_timeout():
    """The deadline bounded the body only: the status line and headers were read with a timeout per
    wait, so a header byte every 0.2 s held the fetch, the agent loop and the expiry of the config
    in force as long as the server liked (review, helper-85)."""
    import socket
    import threading
    import time

    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def drip():
        peer, _ = listener.accept()
        with peer:
            peer.recv(65536)
            peer.sendall(b"HTTP/1.1 200 OK\r\nX")
            while not stop.is_set():
                try:
                    peer.sendall(b"x")
                except OSError:
                    return
                time.sleep(0.2)

    threading.Thread(target=drip, daemon=True).start()
    outcome: list = []

    def fetch():
        try:
            outcome.append(fetch_config(f"http://127.0.0.1:{listener.getsockname()[1]}/c.json", timeout_s=0.5))
        except ConfigFetchError as exc:
            outcome.append(exc)

    try:
        started = time.monotonic()
        worker = threading.Thread(target=fetch, daemon=True)
        worker.start()
        worker.join(timeout=30)  # a bound for the test only
        assert not worker.is_alive() and time.monotonic() - started < 10
        assert isinstance(outcome[0], ConfigFetchError) and "did not answer in time" in str(outcome[0])
    finally:
        stop.set()
        listener.close()


def test_a_fifo_put_in_place_after_the_check_does_not_block_the_fetch(tmp_path, monkeypatch):
    """The path was checked, then opened again by name: a FIFO swapped in between blocked the open
    for good (review, helper-85). What was opened is checked."""
    import os

    from joulehouse.collectors import agent_fetch

    path = tmp_path / "recommended-config.json"
    path.write_bytes(b"{}")
    real_check = agent_fetch.regular_file

    def check_then_swap(*args, **kwargs):
        real_check(*args, **kwargs)
        path.unlink()
        os.mkfifo(path)

    monkeypatch.setattr(agent_fetch, "regular_file", check_then_swap)
    with pytest.raises(ConfigFetchError, match="not a regular file"):
        fetch_config(str(path))
