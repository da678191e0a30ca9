"""What the collect loop (collectors/collect.py) counts: returned by `Collector.run` and read by
the metrics (collectors/metrics.py) at each scrape."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CollectStats:
    polls: int = 0
    rows: int = 0
    reads_ok: int = 0
    source_errors: int = 0
    files_written: int = 0
    disk_full_events: int = 0
    background_dropped_tables: int = 0
    late_polls: int = 0  # polls that overran the interval (the missed ticks are skipped, not fired at once)
    roll_failures: int = 0  # tries to roll a closed segment into the lake that failed (it is kept and retried)
    write_errors: int = 0  # spool writes that failed for another reason than a full disk (read-only, I/O error)
    # At stop: rows read but never written (the disk was full or unwritable to the end, or the
    # memory bound dropped them), and segments left in the spool for the next start to roll.
    rows_not_kept: int = 0
    segments_left: int = 0
    # At start: what a stopped collector left in the spool, rolled into the lake (not in `rows`,
    # which this run read; in `files_written`). Exported as joulehouse_collector_spool_rows_recovered_total.
    rows_recovered: int = 0
    files_recovered: int = 0
    # For the metrics (collectors.metrics): rows handed to the spool per (source, dataset)
    # (joulehouse_collector_readings_spooled_total: they reach the lake as segments roll), errors
    # per source, and the Unix time a Parquet file last went into the lake.
    rows_by_source: dict[tuple[str, str], int] = field(default_factory=dict)
    errors_by_source: dict[str, int] = field(default_factory=dict)
    last_lake_write_at_s: float | None = None
