"""The frame that `joulehouse carbon estimate` and `joulehouse tco estimate` share: the options both
take (the run's size and power first, then the command's own, then --utilization, --config and
--format, the order of --help), the same checks of them, and the same table or document out.

Each command gives only what differs: its own options, and how its figures follow from the
planned run and its settings section ([carbon] or [tco]).
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional

import typer

from joulehouse.cli.output import FORMAT_HELP, OutputFormat, emit_summary
from joulehouse.cli.run_options import (AvgPowerW, Config, Days, GpuHours, Gpus, Hours, Pue, Utilization,
                                         account_settings, gpu_model_option, planned_run, refuse_non_finite,
                                         with_run)

Output = Optional[OutputFormat]


def _option(name: str, annotation, default=None) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


# The run's size and power (planned_run's arguments, after --gpu-model): before each command's own
# options on --help.
RUN_SIZE_OPTIONS = (_option("gpus", Gpus), _option("days", Days), _option("hours", Hours),
                    _option("gpu_hours", GpuHours), _option("avg_power_w", AvgPowerW), _option("pue", Pue))
# After each command's own options on --help.
CLOSING_OPTIONS = (_option("utilization", Utilization, 1.0), _option("config", Config),
                   _option("output", Output, typer.Option(None, "--format", help=FORMAT_HELP)))


def estimate_command(app: typer.Typer, section_name: str, subject: str, rows: tuple,
                     gpu_model_default_of: str = "") -> Callable:
    """A decorator: make `figures` the `estimate` command of `app`.

    `figures(section, run, spec, extra, /, **own_options)` returns the estimate's document (calling
    `fail` on a bad value) and may add to `extra`, which the document carries; its parameters after
    the `/` are the command's own options. The command checks every option for nan and inf,
    loads the settings (`section_name`: "carbon" or "tco"), plans the run, and prints the
    document under the title "<subject> of <the run>" with the table `rows`. --gpu-model's help says
    it is also the default of `gpu_model_default_of` where the command uses it for more than power.
    """
    run_options = (_option("gpu_model", gpu_model_option(gpu_model_default_of)), *RUN_SIZE_OPTIONS)

    def register(figures: Callable[..., dict]) -> Callable[..., None]:
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in inspect.signature(figures, eval_str=True).parameters.values()
               if p.kind is not inspect.Parameter.POSITIONAL_ONLY]

        def command(**options) -> None:
            # typer passes the options in the signature's order, so the first nan or inf named
            # is the first on --help, as when each command listed them itself.
            refuse_non_finite(options)
            section = getattr(account_settings(options["config"]), section_name)
            run, spec, power_from = planned_run(section, **{p.name: options[p.name] for p in run_options},
                                                utilization=options["utilization"])
            extra: dict = {}
            result = figures(section, run, spec, extra, **{p.name: options[p.name] for p in own})
            result, what = with_run(result, run, spec, power_from, extra)
            emit_summary(result, options["output"], title=f"{subject} of {what}", rows=rows)

        # typer reads the options, their help and the command's help from these.
        command.__signature__ = inspect.Signature([*run_options, *own, *CLOSING_OPTIONS])
        command.__doc__ = figures.__doc__
        app.command("estimate")(command)
        return command

    return register
