"""The scheduler's files, installed as `joulehouse.dags` so that `joulehouse run` and a
scheduler's dags_folder find them in any installation (see joulehouse.cli.dagrun)."""
