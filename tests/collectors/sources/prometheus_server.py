"""A real Prometheus (Debian's /usr/bin/prometheus) on 127.0.0.1 scraping one local endpoint,
for the tests of the sources that read it (DCGM, network links)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    """Scrapes every second: `target_port` as job dcgm-exporter, and each of `node_targets`
    ({port: instance label}, e.g. {9100: "node-01:9100"}) as job node, as node_exporter is."""

    def __init__(self, folder: Path, target_port: int, node_targets: dict[int, str] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "prometheus.yml"
        text = ("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: dcgm-exporter\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
        if node_targets:
            text += "  - job_name: node\n    static_configs:\n"
            for port, instance in node_targets.items():
                text += f"      - targets: ['127.0.0.1:{port}']\n        labels: {{instance: '{instance}'}}\n"
        config.write_text(text)
        self.log = open(folder / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200, 20,
                 "Prometheus /-/ready")

    first_scrape_s = 0

    def series_count(self, query: str) -> int:
        r = requests.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=2).json()
        return int(float(r["data"]["result"][0]["value"][1])) if r["data"]["result"] else 0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class TextEndpoint:
    """A local HTTP endpoint serving `body()` in Prometheus' text format at every scrape."""

    def __init__(self, body: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                data = body().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
