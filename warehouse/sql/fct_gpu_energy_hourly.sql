-- fct_gpu_energy_hourly: energy of each GPU in each UTC hour of the day.
-- kind: day
-- grain: one row per (hour_at, gpu_uuid); when several sources (nvml, dcgm) saw the GPU at the
--   same time, each minute is taken from one of them, never summed (the `minute_winners` step of
--   this SQL: the source that covered more of the minute, then counter over power integral, then
--   the higher sampling rate), and the hour is the sum of its minutes. A GPU read under two host
--   names or by two sources one after the other (renamed, moved, its collector changed) keeps
--   every minute of both: a minute both touch is added up where the streams follow one another in
--   it, and taken from one where they overlap. Limits of the minute: where two spans only partly
--   overlap in it, the part only the other stream read is not covered (coverage_ratio says so; at
--   most a minute per switch); a counter interval longer than a minute that loses some of its
--   minutes spreads its energy evenly over those it keeps, off by its power's deviation from the
--   interval's mean there (a counter scraped every 10 minutes beside a 1 Hz power reading: +4.6%
--   in the worst case tried, where one source per hour lost 63% of the energy)
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   host [text] server the GPU sits in (of two in the hour, the one whose minutes covered more of it)
--   gpu_uuid [text] GPU
--   gpu_model [text] NVML name, e.g. "NVIDIA H100 80GB HBM3"
--   energy_kwh [kWh] energy measured over the covered part of the hour (NULL when none covered);
--     not extrapolated: energy_kwh / coverage_ratio estimates the whole hour
--   avg_power_w [W] energy over covered time
--   coverage_ratio [0..1] share of the hour covered by bridged intervals between valid readings
--   energy_source [text] 'counter' when most covered time came from the energy counter, else 'power_integral'
--   source [text] collector source the hour was taken from (nvml, dcgm, ...; of two whose minutes
--     it holds, the one that covered more of it)
--   n_samples [count] clean readings of the streams each minute was taken from (one source's
--     readings in the hour where it won every minute)
--   n_sources [count] sources that saw the GPU in the hour
-- Method, per source stream (host, gpu_uuid, source), between consecutive clean readings t0 < t1:
--   counter: both readings have energy_mj_total, t1 - t0 <= max_counter_gap_s and the counter
--     rose by no more than the plausible maximum (max_power_over_limit_ratio x the higher of
--     the two readings' limits x dt):
--     energy = difference, spread linearly in time (the counter interpolated at hour boundaries);
--   power: else both have power_w and t1 - t0 <= max_gap_s: trapezoid of power, power
--     interpolated linearly at hour boundaries. This also covers a counter reset (counter fell:
--     driver reload, reboot, wrap), where power is the only reading of the whole interval;
--   reset value: else the counter fell, t1 - t0 <= max_counter_gap_s and the post-reset value
--     is plausible: energy = post-reset value (energy since the reload; a lower bound);
--   otherwise the interval is a gap: no energy, not covered.
-- A counter read again before it moved (Prometheus scraping dcgm-exporter faster than it
--   collects; NVML polled faster than the driver updates its counter, every 100 ms on an H200)
--   holds no new measurement: the runs of such unchanged readings join the interval in which the
--   counter then moves, one counter interval from the run's first reading (`repeat_*` below).
--   Taken alone, each repeat was a counter interval of 0 J, and the move after it, all the
--   run's energy in one scrape's time, failed the plausible maximum: a GPU at 600 W read as 0.
--   A run that cannot be one counter interval (too long, implausible, or broken by a reading
--   without the counter) keeps its intervals by power alone, the move that ends it too: its rise
--   holds the run's energy, which the repeats counted already.
-- A counter that steps back by more than its stream's time could hold as energy since a reload
--   (two series of one GPU mixed, one lagging) and is back above where it was within 8 readings
--   is no reset: the dipped readings hold no new measurement and are read as repeats of the most
--   the stream had counted (`counter_dips` below), so the run from before the dip to the first
--   reading past it is one counter interval. Read as a reset, the rise after the dip counted the
--   dip again (+50% where every third reading of a 1 Hz stream lagged 1.5 s). A fall that does not
--   come back so soon (a counter set back for good, or one reading far above the rest) is read as
--   before; held below such a maximum, one high reading had taken the counter off the rest of
--   the day. Limit: a run crossing
--   midnight near max_counter_gap_s long may be merged by one day's build and not the other's,
--   which sees it only from its margin on.
--   Such a stream's counter is as old as its last collection, up to one collection period before
--   the reading: its plausible maximum allows that period more (the stream's time over its runs),
--   or a scrape that just missed a collection, then caught two, threw both away (-6% at 600 W).
WITH stream_flags AS (
    -- streams whose counter repeats; those where a reading without the counter is followed by one
    -- with it: that one may repeat the value before the gap (X, NULL, X, Y), and its interval to Y
    -- then holds energy the power-integrated intervals before it counted (1.8 MJ for 1.08); and
    -- those whose counter steps back further than a reload could explain (steps_back)
    SELECT
        host, gpu_uuid, source,
        bool_or(next_energy_mj_total = energy_mj_total
                OR (energy_mj_total IS NULL AND next_energy_mj_total IS NOT NULL)) AS repeats,
        bool_or(next_energy_mj_total < energy_mj_total
                AND next_energy_mj_total / 1e3 > (CASE WHEN greatest(power_limit_w, next_power_limit_w) > 0
                                                       THEN $max_power_over_limit_ratio * greatest(power_limit_w, next_power_limit_w)
                                                       ELSE $max_power_abs_w END)
                                                  * (epoch_us(next_sampled_at) - epoch_us(sampled_at)) / 1e6) AS steps_back
    FROM int_gpu_samples_checked
    WHERE next_sampled_at IS NOT NULL
      AND (next_energy_mj_total <= energy_mj_total OR (energy_mj_total IS NULL AND next_energy_mj_total IS NOT NULL))
    GROUP BY host, gpu_uuid, source
),
repeat_streams AS (
    -- a reload alone (the counter falls to what the interval could hold) needs no run: only a
    -- repeat, a value after a gap, or a step back sends a stream through the runs below
    SELECT host, gpu_uuid, source
    FROM stream_flags
    WHERE repeats OR steps_back
),
counter_dips AS (
    -- the readings of a stream that steps back that lie below the most of its 8 counter readings
    -- before (since the last reload: a fall the time since the previous counter reading could hold
    -- as energy since a reload) while one of its 8 next is back at or above it; each with that
    -- most (held_mj). A window over these few streams' counter readings only
    SELECT host, gpu_uuid, source, t_us, most_mj AS held_mj
    FROM (
        SELECT
            *,
            -- the most of the 8 readings before: a maximum kept longer, a counter catching up with
            -- an old outlier read as a dip of its last readings before it
            max(c_mj) OVER (PARTITION BY host, gpu_uuid, source, reloads ORDER BY t_us
                            ROWS BETWEEN 8 PRECEDING AND 1 PRECEDING) AS most_mj,
            max(c_mj) OVER (PARTITION BY host, gpu_uuid, source, reloads ORDER BY t_us
                            ROWS BETWEEN 1 FOLLOWING AND 8 FOLLOWING) AS soon_mj
        FROM (
            SELECT
                *,
                sum(reloaded::INTEGER) OVER (PARTITION BY host, gpu_uuid, source ORDER BY t_us
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS reloads
            FROM (
                SELECT
                    *,
                    coalesce(c_mj < previous_c_mj
                             AND c_mj / 1e3 <= (CASE WHEN greatest(limit_w, previous_limit_w) > 0
                                                     THEN $max_power_over_limit_ratio * greatest(limit_w, previous_limit_w)
                                                     ELSE $max_power_abs_w END) * (t_us - previous_t_us) / 1e6,
                             false) AS reloaded
                FROM (
                    SELECT
                        c.host, c.gpu_uuid, c.source,
                        epoch_us(c.sampled_at) AS t_us,
                        c.energy_mj_total AS c_mj,
                        c.power_limit_w AS limit_w,
                        lag(c.energy_mj_total) OVER counter_readings AS previous_c_mj,
                        lag(epoch_us(c.sampled_at)) OVER counter_readings AS previous_t_us,
                        lag(c.power_limit_w) OVER counter_readings AS previous_limit_w
                    FROM int_gpu_samples_checked AS c
                    SEMI JOIN stream_flags AS f
                        ON f.steps_back AND f.host = c.host AND f.gpu_uuid = c.gpu_uuid AND f.source = c.source
                    WHERE c.reason IS NULL AND c.energy_mj_total IS NOT NULL
                    WINDOW counter_readings AS (PARTITION BY c.host, c.gpu_uuid, c.source ORDER BY c.sampled_at)
                )
            )
        )
    )
    WHERE c_mj < most_mj AND soon_mj >= most_mj
),
intervals AS NOT MATERIALIZED (
    -- each energy reading with the next one of its stream (paired in int_gpu_samples_checked).
    -- Two readers (streams with repeats, and the rest), each scanning the checked rows itself:
    -- with no repeats, the second's join finds an empty side and costs nothing
    SELECT
        host, gpu_uuid, source,
        epoch_us(sampled_at) AS t0_us,
        epoch_us(next_sampled_at) AS t1_us,
        power_w::DOUBLE AS p0_w,
        next_power_w::DOUBLE AS p1_w,
        energy_mj_total AS c0_mj,
        next_energy_mj_total AS c1_mj,
        -- the higher of the two ends' limits: across a cap just applied, the energy before it
        -- was drawn under the old, higher limit (greatest() skips a NULL end)
        greatest(power_limit_w, next_power_limit_w) AS limit_w
    FROM int_gpu_samples_checked
    WHERE next_sampled_at IS NOT NULL
),
repeat_intervals AS MATERIALIZED (
    -- a stream's intervals keyed by run: a repeat (counter unchanged) belongs to the run that the
    -- next interval in which the counter moves (or is missing) closes, and all of them start at
    -- the run's counter value. A counter only rises between resets, so that value names the run
    -- without a sort (numbering the runs in time order cost a window over these intervals, 2.4-2.7
    -- -> 2.0-2.2 s, same rows); a value seen again after a reset joins two runs into one too long
    -- to be a counter interval, and their intervals stay as they are. No counter: key -1 (a clean
    -- counter is never negative), never merged. Two readers (the runs, and the intervals that
    -- stay as they are): copied once, narrow and only the streams that repeat, rather than
    -- scanned twice (64-GPU day whose DCGM streams repeat: 1.9 -> 1.7 s)
    SELECT
        *,
        c1_mj = c0_mj AS unchanged,
        coalesce(c0_mj, -1) AS run_index
    FROM (
        -- a reading that dipped repeats the most its stream had counted: a run of repeats, closed by
        -- the first reading past the dip
        SELECT
            i.host, i.gpu_uuid, i.source, i.t0_us, i.t1_us, i.p0_w, i.p1_w,
            coalesce(d0.held_mj, i.c0_mj) AS c0_mj,
            coalesce(d1.held_mj, i.c1_mj) AS c1_mj,
            i.limit_w
        FROM intervals AS i
        SEMI JOIN repeat_streams AS r USING (host, gpu_uuid, source)
        LEFT JOIN counter_dips AS d0
            ON d0.host = i.host AND d0.gpu_uuid = i.gpu_uuid AND d0.source = i.source AND d0.t_us = i.t0_us
        LEFT JOIN counter_dips AS d1
            ON d1.host = i.host AND d1.gpu_uuid = i.gpu_uuid AND d1.source = i.source AND d1.t_us = i.t1_us
    )
    WHERE t0_us IS NOT NULL AND t1_us > t0_us
),
repeat_runs AS (
    -- a run as one counter interval: its first reading to the reading where the counter moved;
    -- slack_us: the stream's collection period (its time over its runs)
    SELECT
        *,
        (max(t1_us) OVER stream - min(t0_us) OVER stream) // count(*) OVER stream AS slack_us
    FROM (
        SELECT
            host, gpu_uuid, source, run_index,
            min(t0_us) AS t0_us,
            max(t1_us) AS t1_us,
            max(c0_mj) AS c0_mj,
            max(CASE WHEN NOT coalesce(unchanged, false) THEN c1_mj END) AS c1_mj,
            max(limit_w) AS limit_w,
            count(*) AS n_intervals,
            -- whole only where its intervals follow one another: a reading without the counter
            -- in between (X, NULL, X, Y) leaves the NULL -> X interval outside the run, counted
            -- from power, and the run spanning it counted it again (39 kJ for 36 kJ)
            sum(t1_us - t0_us) AS run_us
        FROM repeat_intervals
        GROUP BY ALL
    )
    WINDOW stream AS (PARTITION BY host, gpu_uuid, source)
),
repeat_verdicts AS (
    -- after_gap: the run starts at the reading after one without the counter. Its first counter
    -- value was collected up to a period before that reading, while the intervals before it, which
    -- lost the move that would have closed their run, were counted from power up to the reading:
    -- counted from its counter too, the run counted that stretch again (+1.8% with 5% of scrapes
    -- lacking the counter). Such a run is counted from power; the next run starts where its value
    -- was first read, as every run does.
    SELECT
        r.*,
        g.t1_us IS NOT NULL AS after_gap,
        r.n_intervals > 1 AND g.t1_us IS NULL AND r.run_us = r.t1_us - r.t0_us AND r.c1_mj >= r.c0_mj
            AND (r.t1_us - r.t0_us) / 1e6 <= $max_counter_gap_s
            AND (r.c1_mj - r.c0_mj) / 1e3 <= (CASE WHEN r.limit_w > 0 THEN $max_power_over_limit_ratio * r.limit_w
                                                   ELSE $max_power_abs_w END) * (r.t1_us - r.t0_us + r.slack_us) / 1e6
            AS merged
    FROM repeat_runs AS r
    LEFT JOIN (SELECT DISTINCT host, gpu_uuid, source, t1_us FROM repeat_intervals WHERE run_index = -1) AS g
        ON g.host = r.host AND g.gpu_uuid = r.gpu_uuid AND g.source = r.source AND g.t1_us = r.t0_us
),
candidates AS (
    SELECT host, gpu_uuid, source, t0_us, t1_us, p0_w, p1_w, c0_mj, c1_mj, limit_w, 0 AS slack_us
    FROM intervals ANTI JOIN repeat_streams USING (host, gpu_uuid, source)
    UNION ALL
    -- a run that is one counter interval, once (at its first interval); the intervals of the
    -- others as they are, except that a repeat is no counter reading: power only, and so is the
    -- move that ends a run of repeats (the counter's rise there holds the whole run's energy,
    -- which its repeats counted from power already: 46 kJ for 26 kJ over a stuck counter)
    SELECT
        i.host, i.gpu_uuid, i.source,
        CASE WHEN v.merged THEN v.t0_us ELSE i.t0_us END AS t0_us,
        CASE WHEN v.merged THEN v.t1_us ELSE i.t1_us END AS t1_us,
        CASE WHEN v.merged THEN NULL ELSE i.p0_w END AS p0_w,
        CASE WHEN v.merged THEN NULL ELSE i.p1_w END AS p1_w,
        CASE WHEN v.merged THEN v.c0_mj WHEN i.unchanged OR v.n_intervals > 1 OR v.after_gap THEN NULL
             ELSE i.c0_mj END AS c0_mj,
        CASE WHEN v.merged THEN v.c1_mj WHEN i.unchanged OR v.n_intervals > 1 OR v.after_gap THEN NULL
             ELSE i.c1_mj END AS c1_mj,
        i.limit_w, v.slack_us
    FROM repeat_intervals AS i
    JOIN repeat_verdicts AS v USING (host, gpu_uuid, source, run_index)
    WHERE NOT coalesce(v.merged, false) OR i.t0_us = v.t0_us
),
bounded AS (
    SELECT
        *,
        (t1_us - t0_us) / 1e6 AS dt_s,
        (CASE WHEN limit_w > 0 THEN $max_power_over_limit_ratio * limit_w ELSE $max_power_abs_w END)
            * (t1_us - t0_us + slack_us) / 1e6 AS max_plausible_j
    FROM candidates
    WHERE t0_us IS NOT NULL AND t1_us > t0_us
),
classified AS (
    SELECT
        *,
        CASE
            WHEN c0_mj IS NOT NULL AND c1_mj IS NOT NULL AND dt_s <= $max_counter_gap_s
                 AND c1_mj >= c0_mj AND (c1_mj - c0_mj) / 1e3 <= max_plausible_j THEN 'counter'
            WHEN p0_w IS NOT NULL AND p1_w IS NOT NULL AND dt_s <= $max_gap_s THEN 'power'
            WHEN c0_mj IS NOT NULL AND c1_mj IS NOT NULL AND dt_s <= $max_counter_gap_s
                 AND c1_mj < c0_mj AND c1_mj / 1e3 <= max_plausible_j THEN 'reset_value'
        END AS method
    FROM bounded
),
bridged AS (
    SELECT
        *,
        t0_us // 60000000 AS first_minute,
        (t1_us - 1) // 60000000 AS last_minute,
        CASE method
            WHEN 'counter' THEN (c1_mj - c0_mj) / 1e3
            WHEN 'reset_value' THEN c1_mj / 1e3
        END AS counted_j
    FROM classified
    WHERE method IS NOT NULL
),
minute_spans AS (
    -- one row per minute an interval touches (a reading a second crosses a minute once in 60).
    -- Every interval through one unnest, rather than the single-minute ones apart: two branches
    -- made `bridged` two readers, so the checked rows were scanned twice (SCALING.md)
    SELECT * EXCLUDE (minute_index), minute_index
    FROM (
        SELECT *, unnest(range(first_minute, last_minute + 1)) AS minute_index
        FROM bridged
    )
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, minute_index * 60000000) AS a_us,
        least(t1_us, (minute_index + 1) * 60000000) AS b_us
    FROM minute_spans
    WHERE minute_index >= epoch($day::TIMESTAMPTZ)::BIGINT // 60
      AND minute_index < epoch(($day::DATE + 1)::TIMESTAMPTZ)::BIGINT // 60
),
piece_energy AS (
    SELECT
        host, gpu_uuid, source, minute_index, method, a_us, b_us,
        b_us - a_us AS covered_us,
        CASE
            WHEN method = 'power' THEN
                (2 * p0_w + (p1_w - p0_w) * ((a_us - t0_us) + (b_us - t0_us)) / (t1_us - t0_us))
                / 2 * (b_us - a_us) / 1e6
            ELSE counted_j * (b_us - a_us) / (t1_us - t0_us)
        END AS energy_j
    FROM pieces
),
stream_minutes AS (
    SELECT
        host, gpu_uuid, source, minute_index,
        -- exact sums (micro-joules as DECIMAL, whole microseconds), so an hour's energy does not
        -- depend on the order threads add its pieces: a re-run gives the same bits. 38 digits, so
        -- no reading, however wrong its power limit, can overflow the cast and stop the build
        sum(energy_j::DECIMAL(38, 6)) AS energy_j_decimal,
        sum(covered_us) AS covered_us,
        sum(CASE WHEN method <> 'power' THEN covered_us ELSE 0 END) AS counter_us,
        min(a_us) AS span_start_us,
        max(b_us) AS span_end_us
    FROM piece_energy
    GROUP BY host, gpu_uuid, source, minute_index
),
stream_samples AS (
    SELECT
        host, gpu_uuid, source,
        -- whole microseconds: epoch() is a DOUBLE and ::BIGINT rounds, which put a reading at
        -- 23:59:59.7 in the next day's first hour (a 25th GPU-hour, charged twice downstream)
        epoch_us(sampled_at) // 60000000 AS minute_index,
        count(*) AS n_samples,
        -- the source's rate is that of its energy readings: a source writing a row a second that
        -- carries only temperatures beat one measuring power, and the hour lost its energy
        count(*) FILTER (WHERE power_w IS NOT NULL OR energy_mj_total IS NOT NULL) AS n_energy_samples
    FROM int_gpu_samples_checked
    WHERE reason IS NULL AND day = $day::DATE
    GROUP BY ALL
),
models AS (
    SELECT gpu_uuid, max(gpu_model) AS gpu_model
    FROM int_gpu_samples_checked
    WHERE reason IS NULL
    GROUP BY gpu_uuid
),
stream_summary AS MATERIALIZED (
    -- one row per stream-minute (~1,500 per GPU-day, not one per reading), read twice: the
    -- minutes' ranking and the hour's count of sources
    SELECT
        coalesce(h.host, s.host) AS host,
        coalesce(h.gpu_uuid, s.gpu_uuid) AS gpu_uuid,
        coalesce(h.source, s.source) AS source,
        coalesce(h.minute_index, s.minute_index) AS minute_index,
        h.energy_j_decimal,
        coalesce(h.covered_us, 0) AS covered_us,
        coalesce(h.counter_us, 0) AS counter_us,
        h.span_start_us,
        h.span_end_us,
        coalesce(s.n_samples, 0) AS n_samples,
        coalesce(s.n_energy_samples, 0) AS n_energy_samples
    FROM stream_minutes AS h
    FULL OUTER JOIN stream_samples AS s USING (host, gpu_uuid, source, minute_index)
),
-- Each minute is taken apart, and the hour is the sum of its minutes: over a collector switch
-- (NVML until 00:31, DCGM from 00:30) each source's minutes count, where one source per hour kept
-- 558 kJ of a 1,080 kJ hour. One GPU under two host names in one minute (a node renamed, a
-- collector restarted under its FQDN) is two streams of one source. Where their spans in the
-- minute follow one another, they are one reading of the GPU and are added up, under the host
-- that covered more of it; where they overlap (two collectors claiming the GPU at once), they
-- compete as sources do below.
host_spans AS (
    SELECT
        *,
        lag(span_end_us) OVER (PARTITION BY gpu_uuid, source, minute_index
                               ORDER BY span_start_us NULLS LAST, host) AS previous_end_us,
        row_number() OVER (PARTITION BY gpu_uuid, source, minute_index
                           ORDER BY covered_us DESC, n_energy_samples DESC, host) AS host_rank
    FROM stream_summary
),
host_handover AS (
    SELECT
        *,
        -- a stream with no energy in the minute (a lone reading) has no span and overlaps nothing
        bool_and(span_start_us IS NULL OR previous_end_us IS NULL OR span_start_us >= previous_end_us)
            OVER (PARTITION BY gpu_uuid, source, minute_index) AS hosts_follow_on,
        bool_or(span_start_us IS NOT NULL) OVER (PARTITION BY gpu_uuid, source, minute_index) AS any_span
    FROM host_spans
),
host_groups AS (
    -- the streams added up: all of them where they follow one another, except a lone reading
    -- beside a stream that measured the minute (it adds no energy, and its count made the
    -- minute's n_samples match none of the sets the jobs' shares read: a source ending on a
    -- minute boundary split two halves 2/3 : 1/3); it competes on its own, and loses
    SELECT *, hosts_follow_on AND (span_start_us IS NOT NULL OR NOT any_span) AS joins
    FROM host_handover
),
source_minutes AS (
    SELECT
        max(CASE WHEN host_rank = 1 OR NOT joins THEN host END) AS host,
        gpu_uuid, source, minute_index,
        sum(energy_j_decimal) AS energy_j_decimal,
        sum(covered_us) AS covered_us,
        sum(counter_us) AS counter_us,
        sum(n_samples)::BIGINT AS n_samples,  -- a count, as before the hand-over: DuckDB sums BIGINTs into HUGEINT
        sum(n_energy_samples)::BIGINT AS n_energy_samples,
        min(span_start_us) AS span_start_us,
        max(span_end_us) AS span_end_us
    FROM host_groups
    GROUP BY gpu_uuid, source, minute_index, CASE WHEN joins THEN NULL ELSE host END
),
-- The same for sources: where one source's span in the minute ends before the other's begins
-- (NVML until 10:30:20, DCGM from then on), they are added up, under the source that covered
-- more; where they overlap (both read the GPU), they compete below.
source_spans AS (
    SELECT
        *,
        lag(span_end_us) OVER (PARTITION BY gpu_uuid, minute_index
                               ORDER BY span_start_us NULLS LAST, source, host) AS previous_end_us,
        row_number() OVER (PARTITION BY gpu_uuid, minute_index
                           ORDER BY covered_us DESC, n_energy_samples DESC, source, host) AS cover_rank
    FROM source_minutes
),
source_handover AS (
    SELECT
        *,
        bool_and(span_start_us IS NULL OR previous_end_us IS NULL OR span_start_us >= previous_end_us)
            OVER (PARTITION BY gpu_uuid, minute_index) AS sources_follow_on,
        bool_or(span_start_us IS NOT NULL) OVER (PARTITION BY gpu_uuid, minute_index) AS any_span
    FROM source_spans
),
source_groups AS (
    SELECT *, sources_follow_on AND (span_start_us IS NOT NULL OR NOT any_span) AS joins
    FROM source_handover
),
gpu_source_minutes AS (
    SELECT
        max(CASE WHEN cover_rank = 1 OR NOT joins THEN host END) AS host,
        gpu_uuid,
        max(CASE WHEN cover_rank = 1 OR NOT joins THEN source END) AS source,
        minute_index,
        sum(energy_j_decimal) AS energy_j_decimal,
        sum(covered_us) AS covered_us,
        sum(counter_us) AS counter_us,
        sum(n_samples)::BIGINT AS n_samples,
        sum(n_energy_samples)::BIGINT AS n_energy_samples
    FROM source_groups
    GROUP BY gpu_uuid, minute_index,
             CASE WHEN joins THEN NULL ELSE source END,
             CASE WHEN joins THEN NULL ELSE host END
),
-- Each source's hour, ranked as the hour alone would rank it (the criteria below, over the
-- hour): a minute both sources read equally well goes to the hour's first, so equal sources do
-- not take turns minute by minute by their names. And the hour's count of sources.
hour_streams AS MATERIALIZED (
    SELECT
        gpu_uuid, source, hour_index,
        row_number() OVER (
            PARTITION BY gpu_uuid, hour_index
            ORDER BY covered_us >= 0.95 * 3600000000 DESC, counter_us * 2 > covered_us DESC,
                     round(covered_us / 1e6) DESC, n_energy_samples DESC, covered_us DESC, source
        ) AS hour_rank,
        count(*) OVER (PARTITION BY gpu_uuid, hour_index) AS n_sources
    FROM (
        SELECT gpu_uuid, source, minute_index // 60 AS hour_index, sum(covered_us) AS covered_us,
               sum(counter_us) AS counter_us, sum(n_energy_samples) AS n_energy_samples
        FROM stream_summary
        GROUP BY ALL
    )
),
-- One source per GPU-minute where sources overlap, never a sum of two readings of the same time:
-- a source that covered >= 95% of the minute beats one that did not; then the energy counter
-- beats the power integral (the counter integrates on the device, the power reading samples a
-- fraction of the time); then more coverage, to the whole second (a second the minute leaves
-- unread is energy lost, never extrapolated: a 1 Hz counter stream with 2 s unbridged beat a 10 s
-- one that covered the whole minute, -3.3% of the hour); then the higher sampling rate (readings
-- with power or counter: rows that carry neither measure nothing); then more coverage; then the
-- source the hour ranks first, then the source name, so re-runs pick the same one.
minute_winners AS MATERIALIZED (
    -- one row per GPU-minute, read twice: the hour's sums and its labels
    SELECT * EXCLUDE (source_rank, hour_rank)
    FROM (
        SELECT
            m.*,
            m.minute_index // 60 AS hour_index,
            r.hour_rank,
            row_number() OVER (
                PARTITION BY m.gpu_uuid, m.minute_index
                ORDER BY m.covered_us >= 0.95 * 60000000 DESC, m.counter_us * 2 > m.covered_us DESC,
                         round(m.covered_us / 1e6) DESC, m.n_energy_samples DESC, m.covered_us DESC, r.hour_rank,
                         m.source, m.host
            ) AS source_rank
        FROM gpu_source_minutes AS m
        JOIN hour_streams AS r
            ON r.gpu_uuid = m.gpu_uuid AND r.source = m.source AND r.hour_index = m.minute_index // 60
    )
    WHERE source_rank = 1
),
-- The hour: the sum of its minutes, under the (host, source) whose minutes covered most of it
hour_labels AS (
    SELECT
        gpu_uuid, hour_index, host, source,
        row_number() OVER (PARTITION BY gpu_uuid, hour_index
                           ORDER BY covered_us DESC, n_energy_samples DESC, source, host) AS label_rank
    FROM (
        SELECT gpu_uuid, hour_index, host, source, sum(covered_us) AS covered_us,
               sum(n_energy_samples) AS n_energy_samples
        FROM minute_winners
        GROUP BY ALL
    )
),
gpu_hours AS (
    SELECT
        gpu_uuid, hour_index,
        sum(energy_j_decimal)::DOUBLE AS energy_j,
        sum(covered_us) / 1e6 AS covered_s,
        sum(counter_us) / 1e6 AS counter_s,
        sum(n_samples)::BIGINT AS n_samples
    FROM minute_winners
    GROUP BY gpu_uuid, hour_index
)
SELECT
    to_timestamp(w.hour_index * 3600) AS hour_at,
    $day::DATE AS day,
    l.host,
    w.gpu_uuid,
    m.gpu_model,
    CASE WHEN w.covered_s > 0 THEN w.energy_j / 3.6e6 END AS energy_kwh,
    CASE WHEN w.covered_s > 0 THEN w.energy_j / w.covered_s END AS avg_power_w,
    w.covered_s / 3600 AS coverage_ratio,
    CASE
        WHEN w.covered_s = 0 THEN NULL
        WHEN w.counter_s * 2 > w.covered_s THEN 'counter'
        ELSE 'power_integral'
    END AS energy_source,
    l.source,
    w.n_samples,
    n.n_sources
FROM gpu_hours AS w
JOIN hour_labels AS l ON l.gpu_uuid = w.gpu_uuid AND l.hour_index = w.hour_index AND l.label_rank = 1
JOIN hour_streams AS n ON n.gpu_uuid = w.gpu_uuid AND n.hour_index = w.hour_index AND n.hour_rank = 1
LEFT JOIN models AS m ON m.gpu_uuid = w.gpu_uuid
