#!/usr/bin/env bash
# One device run of the NVML probe (infra/device/nvml_probe.py): read-only, about 2.5 minutes.
# Needs, in the repository root, .whl/ with the node role's wheels for the machine's python3
# (pydantic, pydantic-settings, typer, rich, nvidia-ml-py, prometheus-client and their
# dependencies: `pip download --python-version 3.12 ...`); pyarrow and torch are the machine's.
# Writes under $OUT: answers.json, power_20ms.csv, phases.json, smi.csv, nvidia-smi-q.txt,
# collect.log, collector.prom and node.tar.gz (the collector's lake and spool).
set -u
W=/tmp/jh
rm -rf "$W" && mkdir -p "$W/site" "$W/pkg/joulehouse"
python3 -m pip install --quiet --no-index --no-deps --target "$W/site" .whl/*.whl
cp -r joulehouse/. "$W/pkg/joulehouse/"
for d in collectors warehouse models reports dags; do ln -s "$PWD/$d" "$W/pkg/joulehouse/$d"; done
export PYTHONPATH="$W/site:$W/pkg" PYTHONUNBUFFERED=1
# from another folder: the repository root's joulehouse/ (without its layers) would shadow the package
(cd "$W" && python3 -c 'import pyarrow, pynvml, joulehouse.collectors.collect; print("pyarrow", pyarrow.__version__, "pynvml", pynvml.__file__)')
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
python3 infra/device/nvml_probe.py answers "$OUT/answers.json" || echo "answers failed: $?"
(cd "$W" && exec python3 -m joulehouse collect --source nvml --source links --lake "$W/node/lake" --interval 250ms \
  --flush-interval 1s --roll-interval 20s --host h200-probe --metrics-textfile "$W/collector.prom" \
  > "$W/collect.log" 2>&1) &
collector=$!
nvidia-smi --query-gpu=timestamp,index,uuid,name,power.draw,power.draw.instant,enforced.power.limit,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,memory.used,pstate \
  --format=csv -lms 500 -f "$OUT/smi.csv" &
smi=$!
python3 infra/device/nvml_probe.py sample "$OUT/power_20ms.csv" 104 &
sampler=$!
sleep 2
python3 infra/device/nvml_probe.py load "$OUT/phases.json" || echo "load failed: $?"
wait "$sampler"
kill -TERM "$collector"; wait "$collector"; echo "collect exit $?"
kill "$smi" 2>/dev/null
cp "$W/collect.log" "$OUT/"; cp "$W/collector.prom" "$OUT/" 2>/dev/null
tar czf "$OUT/node.tar.gz" -C "$W" node
tail -5 "$W/collect.log"; ls -la "$OUT"
