"""Prints, as JSON, each rank's order of compute actions in torch.distributed.pipelining's
schedules, for tests/strategies/pipeline/pipeline_orders_test.cpp to compare with ours.

Output: {"<our schedule name>": {"p,v,m": [[[pass, stage, micro], ...] per rank]}} where pass is
F (forward), B (full backward), I (input gradient) or W (weight gradient). DualPipeV's overlapped
forward+backward pairs appear as their forward, then their backward: the order they run in here.
"""

import json
import sys

from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops
from torch.distributed.pipelining.schedules import _ComputationType

# GPipe and 1F1B are left out: get_schedule_ops builds single-stage schedules from one mocked
# stage at rank 0, so their orders for the other ranks are not what those ranks run.
OURS_TO_PYTORCH = {
    "interleaved-1f1b": "Interleaved1F1B",
    "zero-bubble": "InterleavedZeroBubble",
    "zbv": "ZBVZeroBubble",
    "dualpipev": "DualPipeV",
}
LETTER = {
    _ComputationType.FORWARD: "F",
    _ComputationType.FULL_BACKWARD: "B",
    _ComputationType.BACKWARD_INPUT: "I",
    _ComputationType.BACKWARD_WEIGHT: "W",
}
CASES = [(2, 2, 4), (4, 2, 8), (3, 2, 6)]  # (p, v, m) from issue 23


def flatten(action):
    # Only compute actions: PyTorch also lists gradient reductions and communication.
    if action is None or (
        action.computation_type not in LETTER
        and action.computation_type != _ComputationType.OVERLAP_F_B
    ):
        return []
    if action.computation_type == _ComputationType.OVERLAP_F_B:
        return [step for sub in action.sub_actions for step in flatten(sub)]
    return [[LETTER[action.computation_type], action.stage_index, action.microbatch_index]]


def main():
    out = {}
    for ours, theirs in OURS_TO_PYTORCH.items():
        out[ours] = {}
        for p, v, m in CASES:
            ops = get_schedule_ops(theirs, p, m, v)
            out[ours][f"{p},{v},{m}"] = [
                [step for action in rank for step in flatten(action)] for rank in ops
            ]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
