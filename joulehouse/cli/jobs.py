"""`joulehouse jobs predict-energy`: a job's energy on another GPU model, before it runs there."""

from __future__ import annotations

import math
from typing import Optional

import typer

from joulehouse.cli.options import fail
from joulehouse.cli.output import FORMAT_HELP, OutputFormat, emit

jobs_app = typer.Typer(no_args_is_help=True, help="Jobs: energy predicted on another GPU model.")


@jobs_app.command("predict-energy")
def predict_energy(
    from_gpu_model: str = typer.Option(..., help="The GPU model the job ran on (NVML name, e.g. 'NVIDIA A100-SXM4-80GB')."),
    to_gpu_model: str = typer.Option(..., help="The GPU model to predict for."),
    energy_j: float = typer.Option(..., help="The job's measured GPU energy on the first model, J (all its GPUs)."),
    time_s: float = typer.Option(..., help="The job's wall time there, s."),
    gpus: int = typer.Option(1, help="GPUs the job held (the same number on both models)."),
    avg_power_w: Optional[float] = typer.Option(None, help="Average power per GPU, W (default: energy / (time x gpus))."),
    bottleneck: str = typer.Option("unknown", help="compute-bound | memory-bound | unknown."),
    precision: str = typer.Option("bf16", help="fp32 | tf32 | fp16 | bf16 | fp8 | int8: the math the job runs in."),
    output: Optional[OutputFormat] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Predict a job's energy (J) and time (s) on another GPU model from its run on one.

    From its run on --from-gpu-model to --to-gpu-model, by the GPU catalogue (peak throughput,
    memory bandwidth, TDP, idle power).

    Example: joulehouse jobs predict-energy --from-gpu-model 'NVIDIA A100-SXM4-80GB'
    --to-gpu-model 'NVIDIA H100 80GB HBM3' --energy-j 2.5e6 --time-s 3600 --gpus 8
    """
    from joulehouse.models.gpu_catalogue import CatalogueError
    from joulehouse.models.other_gpu_energy import implausible_power, predict_energy_on

    try:
        # the predictor names a non-positive or non-finite input itself; judged here: what they make
        given_ok = all(math.isfinite(v) and v > 0 for v in (energy_j, time_s, gpus, avg_power_w or 1.0))
        per_gpu_w = (avg_power_w if avg_power_w is not None else energy_j / (time_s * gpus)) if given_ok else None
        problem = implausible_power(from_gpu_model, per_gpu_w) if per_gpu_w is not None else None
        if problem:
            given = "--avg-power-w" if avg_power_w is not None else "--energy-j / (--time-s x --gpus)"
            fail(f"{given}: {problem}: check the units (J for all the job's GPUs, s of wall time, W per GPU)")
        prediction = predict_energy_on(from_gpu_model, to_gpu_model, energy_j, time_s, gpus=gpus,
                                       avg_power_w=avg_power_w, bottleneck=bottleneck, precision=precision)
    except (CatalogueError, ValueError) as exc:
        fail(str(exc.args[0]) if exc.args else str(exc))
    record = prediction.as_dict()
    record["assumptions"] = "; ".join(record["assumptions"])
    emit([record], output, single=True, title=f"{prediction.from_gpu_model} -> {prediction.to_gpu_model}",
         columns=["to_gpu_model", "predicted_energy_j", "predicted_time_s", "predicted_avg_power_w", "busy_ratio",
                  "time_ratio", "assumptions"])


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")
