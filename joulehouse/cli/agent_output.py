"""How `joulehouse agent` prints an apply's outcomes: a table where the terminal is wide enough, one
block per GPU on a narrow one (80 columns), the natural width when piped. UUIDs and reasons come
from the GPU and the config file, so they are printed as written, never read as rich markup."""

from __future__ import annotations

from joulehouse.cli.output import stdout_console

# Under this many columns the six-column table squeezes the reasons to a few letters a line.
TABLE_MIN_WIDTH = 120


def print_result(result) -> None:
    """The outcomes: a table where it fits, else one block per GPU (an 80-column terminal)."""
    from joulehouse.collectors.agent import format_watts

    title = f"{'dry run: ' if result.dry_run else ''}{result.summary()}"
    watts = lambda w: "" if w is None else format_watts(w)  # noqa: E731
    rows = [(o.gpu_uuid or "-", o.action, watts(o.power_limit_w_before), watts(o.power_limit_w_requested),
             watts(o.power_limit_w_after), o.reason or "") for o in result.outcomes]
    console = stdout_console()
    if console.width >= TABLE_MIN_WIDTH:
        console.print(_outcome_table(title, rows))
    else:
        _print_outcome_blocks(console, title, rows)


def _outcome_table(title: str, rows: list[tuple[str, ...]]):
    from rich.markup import escape
    from rich.table import Table

    # the uuids and reasons come from the GPU and the config file: printed as written, never as markup
    table = Table(title=escape(title))
    table.add_column("GPU UUID", no_wrap=True)
    table.add_column("action", no_wrap=True)
    for col in ("before W", "requested W", "after W"):
        table.add_column(col, justify="right")
    table.add_column("reason", overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def _print_outcome_blocks(console, title: str, rows: list[tuple[str, ...]]) -> None:
    from rich.text import Text  # Text is never parsed as markup: values print as written

    indent = "    "
    console.print(Text(title))
    for uuid, action, before, requested, after, reason in rows:
        console.print(Text(f"{uuid}  {action}"))
        for line in (f"W before {before or '-'}, requested {requested or '-'}, after {after or '-'}", reason):
            # wrapped at spaces (a word longer than the line is folded, never cut), each line indented
            for wrapped in Text(line, overflow="fold").wrap(console, max(console.width - len(indent), 20)):
                console.print(Text(indent) + wrapped)
