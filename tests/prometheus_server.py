"""A real Prometheus for tests: Debian's /usr/bin/prometheus on 127.0.0.1 and a free port,
scraping local endpoints every second, with its TSDB in a temp folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests

PROMETHEUS = "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


class PrometheusServer:
    """Scrapes every second `targets`: one port (job dcgm-exporter), or {job name: [ports]}; and
    each of `node_targets` ({port: instance label}, e.g. {9100: "node-01:9100"}) as job node, under
    the instance label a real node_exporter target carries; `flags` go to the prometheus command line
    (e.g. a short --storage.tsdb.retention.time)."""

    def __init__(self, folder: Path, targets: int | Mapping[str, Sequence[int]],
                 node_targets: Mapping[int, str] | None = None, flags: Sequence[str] = ()) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        jobs = {"dcgm-exporter": [targets]} if isinstance(targets, int) else targets
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "prometheus.yml"
        scrape = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: [{', '.join(repr(f'127.0.0.1:{p}') for p in ports)}]\n"
            for job, ports in jobs.items())
        if node_targets:
            scrape += "  - job_name: node\n    static_configs:\n" + "".join(
                f"      - targets: ['127.0.0.1:{port}']\n        labels: {{instance: '{instance}'}}\n"
                for port, instance in node_targets.items())
        config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n" + scrape)
        self.log = open(folder / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200, 20,
                 "Prometheus /-/ready")

    first_scrape_s = 0

    def query(self, query: str) -> list[dict]:
        """The instant query's result vector (each {"metric": labels, "value": [t, "text"]})."""
        r = requests.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=2).json()
        return r["data"]["result"]

    def series_count(self, query: str) -> int:
        result = self.query(query)
        return int(float(result[0]["value"][1])) if result else 0

    def pause_scrapes(self, seconds: float) -> tuple[float, float]:
        """Stop the server (SIGSTOP) for `seconds`, as a hung or restarting Prometheus: no scrape
        and no staleness marker in between. Returns (stopped_s, resumed_s), Unix times."""
        stopped_s = time.time()
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(self.process.pid, signal.SIGCONT)
        return stopped_s, time.time()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@contextmanager
def scraped(server: PrometheusServer, ready: Callable[[], bool], first_scrape_query: str,
            endpoints: Sequence[HttpStub] = ()) -> Iterator[PrometheusServer]:
    """`server` once `ready()` holds (the first scrapes are queryable about 5 s after start),
    `first_scrape_s` the first whole second after the instant `first_scrape_query` gives (range
    queries evaluate at whole seconds); the server and `endpoints` stopped after."""
    try:
        wait_for(ready, 30, "the first scrapes")
        server.first_scrape_s = server.series_count(first_scrape_query) + 1
        yield server
    finally:
        server.stop()
        for endpoint in endpoints:
            endpoint.stop()


class HttpStub:
    """A local HTTP server answering every GET with `answer(path)` -> (status, body, content type):
    an exporter or a proxy a test stands in for."""

    def __init__(self, answer: Callable[[str], tuple[int, bytes, str]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status, body, content_type = answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class TextEndpoint(HttpStub):
    """A local HTTP endpoint serving Prometheus' text format: `text()` at every GET (an exporter
    stand-in whose values and labels a test changes while Prometheus scrapes it)."""

    def __init__(self, text: Callable[[], str]) -> None:
        super().__init__(lambda path: (200, text().encode(), "text/plain; version=0.0.4; charset=utf-8"))
