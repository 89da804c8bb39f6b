"""Holistic Trace Analysis and `shardscope report` agree on real PyTorch profiler GPU traces
(issue 36 §2): folders of per-rank torch.profiler files that PyTorch itself wrote on a GPU
(assets/traces/kineto/gpu-*, from scripts/kineto-gpu-traces.py on an H200), read by HTA and by
our Kineto reader. Per rank, idle, compute and non-compute time as percentages of the first
kernel start .. last kernel end, and the communication/compute overlap, must agree within
TOLERANCE_PP percentage points; HTA prints NaN overlap where a rank has no communication kernel
(Gloo runs its collectives on the host), and so must we (null).

usage: hta_profiler_traces_check.py SHARDSCOPE_BINARY FOLDER...
"""

import json
import logging
import math
import subprocess
import sys
import warnings

TOLERANCE_PP = 0.1


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    binary, folders = sys.argv[1], sys.argv[2:]
    logging.disable(logging.WARNING)  # HTA logs every file it parses as a warning
    warnings.filterwarnings("ignore")  # pandas, inside HTA
    from hta.trace_analysis import TraceAnalysis

    worst = 0.0
    for folder in folders:
        report = subprocess.run([binary, "report", folder, "--json"], capture_output=True,
                                text=True)
        if report.returncode != 0:
            fail("shardscope report %s failed:\n%s%s" % (folder, report.stdout, report.stderr))
        ours = {r["rank"]: r for r in json.loads(report.stdout)["hta"]}
        analysis = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
        overlap = analysis.get_comm_comp_overlap(visualize=False).set_index("rank")
        breakdown = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
        if sorted(ours) != sorted(breakdown.index):
            fail("%s: ranks HTA %s, report %s" % (folder, sorted(breakdown.index), sorted(ours)))
        print(folder)
        print("rank  figure          HTA   report")
        for rank in sorted(ours):
            if ours[rank]["first_step"] != min(analysis.t.get_iterations(rank)):
                fail("%s rank %d: first step %s, HTA's %s" %
                     (folder, rank, ours[rank]["first_step"], analysis.t.get_iterations(rank)))
            pairs = (("idle %", breakdown.loc[rank, "idle_time_pctg"], ours[rank]["idle_pct"]),
                     ("compute %", breakdown.loc[rank, "compute_time_pctg"],
                      ours[rank]["compute_pct"]),
                     ("non-compute %", breakdown.loc[rank, "non_compute_time_pctg"],
                      ours[rank]["non_compute_pct"]),
                     ("overlap %", overlap.loc[rank, "comp_comm_overlap_pctg"],
                      ours[rank]["overlap_pct"]))
            for name, theirs, mine in pairs:
                print("%4d  %-13s %7.2f  %7s" % (rank, name, theirs,
                                                 "-" if mine is None else "%.2f" % mine))
                if math.isnan(theirs) or mine is None:
                    if not (math.isnan(theirs) and mine is None):
                        fail("%s rank %d %s: HTA %s, report %s" % (folder, rank, name, theirs, mine))
                    continue
                if not abs(theirs - mine) <= TOLERANCE_PP:
                    fail("%s rank %d %s: HTA %.2f, report %.2f" % (folder, rank, name, theirs, mine))
                worst = max(worst, abs(theirs - mine))
            if not breakdown.loc[rank, "compute_time_pctg"] > 0:
                fail("%s rank %d: HTA finds no compute kernel to compare" % (folder, rank))
    print("OK: HTA and report agree within %.3f percentage points" % worst)


if __name__ == "__main__":
    main()
