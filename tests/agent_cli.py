"""Fixtures of the `joulehouse agent` CLI tests: the commands registered on their own app, run
off a node (no /var/lib/joulehouse, whatever the machine running the tests has)."""

from __future__ import annotations

import pytest
import typer


@pytest.fixture(autouse=True)
def off_a_node(tmp_path, monkeypatch):
    monkeypatch.setattr("joulehouse.cli.agent.NODE_DATA", tmp_path / "no-node-data")


@pytest.fixture()
def app():
    from joulehouse.cli.agent import register

    app = typer.Typer()
    register(app)
    return app
