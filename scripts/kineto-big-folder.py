"""Makes a large folder of PyTorch profiler traces from real ones, for timing how fast shardscope
opens and draws a big job (issue 36: a 16-rank folder of 200 MB in all).

  python3 scripts/kineto-big-folder.py OUT_DIR [RANKS] [MEGABYTES]

Each rank's file is one of assets/traces/kineto/gpu-ddp-gloo-w4's four real files (an H200 job's,
rank r taking file r % 4), its events repeated back to back in time until the folder holds about
MEGABYTES (default 200) over RANKS (default 16) ranks, with distributedInfo naming the rank and
world and the ProfilerStep numbers continued. Uncompressed .json, as export_chrome_trace writes.
"""

import copy
import gzip
import json
import os
import sys

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets", "traces",
                      "kineto", "gpu-ddp-gloo-w4")


def main():
    out = sys.argv[1]
    ranks = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    megabytes = float(sys.argv[3]) if len(sys.argv) > 3 else 200
    os.makedirs(out, exist_ok=True)
    sources = sorted(os.listdir(SOURCE))
    files = []
    for name in sources:
        with gzip.open(os.path.join(SOURCE, name), "rt") as f:
            files.append(json.load(f))
    one_copy = sum(len(json.dumps(f)) for f in files) / len(files)
    copies = max(1, round(megabytes * 1e6 / ranks / one_copy))
    for rank in range(ranks):
        trace = copy.deepcopy(files[rank % len(files)])
        events = trace["traceEvents"]
        timed = [e for e in events if "ts" in e]
        start = min(float(e["ts"]) for e in timed)
        span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed) - start
        steps = sum(1 for e in timed if str(e.get("name", "")).startswith("ProfilerStep#"))
        repeated = list(events)
        for k in range(1, copies):
            for e in timed:
                c = dict(e)
                c["ts"] = float(e["ts"]) + k * (span + 1000.0)
                name = str(e.get("name", ""))
                if name.startswith("ProfilerStep#"):
                    c["name"] = "ProfilerStep#%d" % (int(name[13:]) + k * steps)
                repeated.append(c)
        trace["traceEvents"] = repeated
        trace["distributedInfo"] = dict(trace.get("distributedInfo", {}), rank=rank,
                                        world_size=ranks)
        with open(os.path.join(out, "rank-%d.pt.trace.json" % rank), "w") as f:
            json.dump(trace, f)
    total = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    print("%s: %d ranks, %d copies of a real rank's 3 steps each, %.0f MB" %
          (out, ranks, copies, total / 1e6))


if __name__ == "__main__":
    main()
