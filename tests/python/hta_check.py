"""Holistic Trace Analysis (HTA, Meta's analyser of PyTorch distributed traces) reads a shardscope
run and finds the same figures as `shardscope report`.

One run (ddp_bucketed, 4 ranks, 3 steps, buckets small enough that all-reduces run while backward
goes on) writes `--trace DIR/`: DIR/rank-R.json in Kineto's shape and DIR/trace.sst, the native
trace of the same run. HTA loads the directory; `shardscope report DIR` reads trace.sst.

Windows. HTA analyses the kernels launched inside the trace's ProfilerStep spans, except the
last step unless include_last_profiler_step=True; a kernel belongs to the step its launch falls
in. The export writes a ProfilerStep for each measured step, over report's window of the step
(first start to last end of the rank's events of that step, so a collective issued after the
step's own span is in it), for every step but the first (warm-up), which report's per-step
medians leave out too. With include_last_profiler_step=True HTA's window is therefore steps 1..last, and report's
"as one window" table covers the same steps with the same definitions (our interval code over
the native trace; HTA's pandas code over the JSON), so each figure must agree within 1
percentage point (the export rounds times to whole microseconds).

Also checked, from HTA's own data frames: every rank is its own rank (HTA once put all four
into rank 0), the steps HTA found are the measured ones, every kernel belongs to one of them
(linked to its launch by correlation id), and no two kernels on one stream overlap.

usage: hta_check.py SHARDSCOPE_BINARY WORK_DIR
"""

import logging
import os
import re
import shutil
import subprocess
import sys
import warnings

TOLERANCE_PP = 1.0  # percentage points


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def report_window_table(text):
    """rank -> (first step, last step, overlap %, idle %, compute %, non-compute %)."""
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if "as Holistic Trace Analysis computes" in line),
        None)
    if start is None:
        fail("report has no Holistic Trace Analysis table:\n" + text)
    rows = {}
    for line in lines[start + 2:]:
        m = re.match(r"\s*(\d+)\s+(-?\d+)-(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$",
                     line)
        if not m:
            break
        rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3))) + tuple(
            float(m.group(i)) for i in range(4, 8))
    return rows


def main():
    binary, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    trace_dir = os.path.join(work, "hta") + "/"
    world, steps = 4, 3
    run = subprocess.run(
        [binary, "run", "--preset", "tiny", "--strategy", "ddp_bucketed", "--world", str(world),
         "--steps", str(steps), "--bucket-mb", "0.05", "--no-reference", "--trace", trace_dir],
        capture_output=True, text=True)
    if run.returncode != 0:
        fail("shardscope run failed:\n" + run.stdout + run.stderr)
    files = sorted(f for f in os.listdir(trace_dir) if f.endswith(".json"))
    if files != ["rank-%d.json" % r for r in range(world)] or "trace.sst" not in os.listdir(
            trace_dir):
        fail("trace directory holds %s" % sorted(os.listdir(trace_dir)))
    report = subprocess.run([binary, "report", trace_dir], capture_output=True, text=True)
    if report.returncode != 0:
        fail("shardscope report failed:\n" + report.stdout + report.stderr)
    ours = report_window_table(report.stdout)
    print(report.stdout)

    logging.disable(logging.WARNING)  # HTA logs every file it parses as a warning
    warnings.filterwarnings("ignore", category=FutureWarning)  # pandas, inside HTA
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import get_kernel_type

    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")
    breakdown = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    print(overlap.to_string())
    print(breakdown.to_string())

    if sorted(overlap.index) != list(range(world)) or sorted(ours) != list(range(world)):
        fail("ranks: HTA %s, report %s" % (sorted(overlap.index), sorted(ours)))
    measured = list(range(1, steps))
    sym = analysis.t.symbol_table.get_sym_table()
    for rank in range(world):
        df = analysis.t.get_trace(rank)
        kernels = df[df["stream"].ge(0)]
        kinds = {get_kernel_type(sym[n]) for n in kernels["name"]}
        if not {"COMMUNICATION", "COMPUTATION"} <= kinds:
            fail("rank %d: HTA sees kernels of kinds %s only" % (rank, sorted(kinds)))
        iterations = sorted(int(i) for i in kernels["iteration"].unique())
        if iterations != measured or analysis.t.get_iterations(rank) != measured:
            fail("rank %d: kernels in iterations %s, HTA's steps %s, measured steps %s" %
                 (rank, iterations, analysis.t.get_iterations(rank), measured))
        for stream, k in kernels.sort_values("ts").groupby("stream"):
            if (k["ts"].values[1:] < (k["ts"] + k["dur"]).values[:-1]).any():
                fail("rank %d: kernels overlap on stream %d" % (rank, stream))

    # The same files read as the PyTorch profiler's (issue 36): the rank files alone, without the
    # native trace beside them, through shardscope's Kineto reader.
    kineto_dir = os.path.join(work, "kineto") + "/"
    os.makedirs(kineto_dir)
    for f in files:
        shutil.copy(os.path.join(trace_dir, f), kineto_dir)
    report_kineto = subprocess.run([binary, "report", kineto_dir], capture_output=True, text=True)
    if report_kineto.returncode != 0:
        fail("shardscope report of the Kineto files failed:\n" + report_kineto.stdout +
             report_kineto.stderr)
    read_back = report_window_table(report_kineto.stdout)
    print(report_kineto.stdout)

    worst = 0.0
    print("rank  figure        HTA      report  report of the Kineto files")
    for rank in range(world):
        first, last, *figures = ours[rank]
        if read_back.get(rank, (None, None))[:2] != (first, last):
            fail("rank %d: the Kineto files' window is %s" % (rank, read_back.get(rank)))
        kineto_figures = read_back[rank][2:]
        if (first, last) != (measured[0], measured[-1]):
            fail("rank %d: report's window is steps %d-%d" % (rank, first, last))
        hta = (overlap.loc[rank, "comp_comm_overlap_pctg"], breakdown.loc[rank, "idle_time_pctg"],
               breakdown.loc[rank, "compute_time_pctg"],
               breakdown.loc[rank, "non_compute_time_pctg"])
        for name, theirs, mine, read in zip(("overlap %", "idle %", "compute %", "non-compute %"),
                                            hta, figures, kineto_figures):
            print("%4d  %-12s  %7.2f  %7.2f  %7.2f" % (rank, name, theirs, mine, read))
            for source, value in (("report", mine), ("report of the Kineto files", read)):
                if not abs(theirs - value) <= TOLERANCE_PP:  # NaN fails too
                    fail("rank %d %s: HTA %.2f, %s %.2f" % (rank, name, theirs, source, value))
                worst = max(worst, abs(theirs - value))
        # A comparison of nothing with nothing proves nothing: communication must overlap (the
        # first bucket is issued while backward goes on; how much overlaps depends on the load).
        if not figures[0] > 0.0:
            fail("rank %d: overlap %.2f %% leaves nothing to compare" % (rank, figures[0]))
    print("OK: HTA and report agree within %.2f percentage points" % worst)


if __name__ == "__main__":
    main()
