"""`python -m joulehouse`: the same command as `joulehouse`."""

from joulehouse.cli.main import app

app(prog_name="joulehouse")
