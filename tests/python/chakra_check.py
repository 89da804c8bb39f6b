"""Reads the Chakra execution traces of a `--trace DIR/` folder with a protobuf wire decoder of
its own (no protoc, no generated code, no shardscope code) and checks them against Chakra's
schema (et_def.proto's field numbers) and against the Kineto files written beside them.

  python tests/python/chakra_check.py DIR

Per rank file: a GlobalMetadata then Nodes, each a varint length and the message; ids unique;
every dependency names an earlier node, and a data dependency one that ended before the node
started. Across files: every send has its receive (src, dst, tag, size). Against the Kineto file
of the same rank: each collective, send and receive it holds is a node of the same type and size,
and the compute it shows is there too. Exits 1 with what differs.
"""

import collections
import glob
import json
import os
import sys

COMP, SEND, RECV, COLL = 4, 5, 6, 7
COMM_TYPES = {"all_reduce": 0, "reduce": 1, "all_gather": 2, "all_gather_into": 2, "gather": 3,
              "scatter": 4, "broadcast": 5, "all_to_all": 6, "reduce_scatter": 7,
              "reduce_scatter_tensor": 7, "barrier": 9}


def varint(buf, i):
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of one message; length-delimited values as bytes."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wire} of field {number}")
        out.append((number, wire, value))
    return out


def packed(value, wire):
    if wire == 0:
        return [value]
    items, i = [], 0
    while i < len(value):
        v, i = varint(value, i)
        items.append(v)
    return items


def attribute(buf):
    name, value = "", None
    for number, wire, v in fields(buf):
        if number == 1:
            name = v.decode()
        elif number == 29:
            value = v.decode()
        elif number in (7, 9, 13, 27):  # int32, int64, uint64, bool: varints
            value = v if v < (1 << 63) else v - (1 << 64)
    return name, value


def node(buf):
    # proto3 leaves fields at their default (0, "") out of the message.
    n = {"id": 0, "ctrl": [], "data": [], "attr": {}, "start": 0, "dur": 0, "type": 0, "name": ""}
    for number, wire, v in fields(buf):
        if number == 1:
            n["id"] = v
        elif number == 2:
            n["name"] = v.decode()
        elif number == 3:
            n["type"] = v
        elif number == 4:
            n["ctrl"] += packed(v, wire)
        elif number == 5:
            n["data"] += packed(v, wire)
        elif number == 6:
            n["start"] = v
        elif number == 7:
            n["dur"] = v
        elif number == 10:
            key, value = attribute(v)
            n["attr"][key] = value
    return n


def read_et(path):
    buf = open(path, "rb").read()
    messages, i = [], 0
    while i < len(buf):
        n, i = varint(buf, i)
        messages.append(buf[i:i + n])
        i += n
    if i != len(buf):
        raise ValueError(f"{path}: the last message runs past the end of the file")
    meta = dict((number, v) for number, _, v in fields(messages[0]))
    return meta.get(1, b"").decode(), [node(m) for m in messages[1:]]


def check_rank(path, version, nodes, problems):
    if not version:
        problems.append(f"{path}: GlobalMetadata has no version")
    by_id = {}
    for n in nodes:
        if n.get("id") in by_id:
            problems.append(f"{path}: node id {n.get('id')} twice")
        for dep in n["ctrl"] + n["data"]:
            if dep not in by_id:
                problems.append(f"{path}: node {n['id']} ({n['name']}) depends on {dep}, "
                                "no earlier node")
        for dep in n["data"]:
            d = by_id.get(dep)
            if d and d["start"] + d["dur"] > n["start"] + 1:
                problems.append(f"{path}: node {n['id']} ({n['name']}) starts at {n['start']} us "
                                f"before {dep} ({d['name']}) ends at {d['start'] + d['dur']}")
        by_id[n.get("id")] = n


def check_against_kineto(path, nodes, kineto, problems):
    """Each collective, send and receive the Kineto file shows is a node of that type and size;
    each compute kernel it shows that holds no other is a compute node of that name (the Kineto
    file leaves out a warm-up step, the Chakra file does not)."""
    events = [e for e in json.load(open(kineto))["traceEvents"] if e.get("ph") == "X"]
    compute = [e for e in events
               if e.get("cat") == "kernel" and "Collective name" not in e.get("args", {})]

    def holds_another(e):
        return any(o is not e and e["ts"] <= o["ts"] and
                   o["ts"] + o["dur"] <= e["ts"] + e["dur"] and o["dur"] < e["dur"]
                   for o in compute)
    have = collections.Counter()
    for n in nodes:
        a = n["attr"]
        if n["type"] == COLL:
            have[("coll", a.get("comm_type"), a.get("comm_size"))] += 1
        elif n["type"] in (SEND, RECV):
            have[(n["type"], a.get("comm_tag"), a.get("comm_size"))] += 1
        elif n["type"] == COMP:
            have[("comp", n["name"])] += 1
    want = collections.Counter()
    for e in events:
        args = e.get("args", {})
        op = args.get("Collective name")
        if op in ("send", "recv"):
            want[(SEND if op == "send" else RECV, args["seq"], args["bytes"])] += 1
        elif op is not None:
            want[("coll", COMM_TYPES[op], args["bytes"])] += 1
        elif e.get("cat") == "kernel" and not holds_another(e):
            want[("comp", e["name"])] += 1
    for key, count in want.items():
        if have[key] < count:
            problems.append(f"{path}: the Kineto file shows {count} of {key}, "
                            f"the Chakra file {have[key]}")
    return sum(want.values())


def main(folder):
    problems, ranks = [], {}
    for path in sorted(glob.glob(os.path.join(folder, "rank-*.et"))):
        rank = int(os.path.basename(path)[5:-3])
        version, nodes = read_et(path)
        check_rank(path, version, nodes, problems)
        ranks[rank] = nodes
        kineto = os.path.join(folder, f"rank-{rank}.json")
        matched = check_against_kineto(path, nodes, kineto, problems)
        types = collections.Counter(n["type"] for n in nodes)
        deps = sum(len(n["ctrl"]) + len(n["data"]) for n in nodes)
        print(f"rank {rank}: {len(nodes)} nodes (compute {types[COMP]}, collectives "
              f"{types[COLL]}, sends {types[SEND]}, receives {types[RECV]}), {deps} "
              f"dependencies, {matched} Kineto events found")
    if not ranks:
        problems.append(f"{folder}: no rank-*.et")
    sends = collections.Counter()
    recvs = collections.Counter()
    for rank, nodes in ranks.items():
        for n in nodes:
            a = n["attr"]
            key = (a.get("comm_src"), a.get("comm_dst"), a.get("comm_tag"), a.get("comm_size"))
            if n["type"] == SEND:
                sends[key] += 1
            elif n["type"] == RECV:
                recvs[key] += 1
    if sends != recvs:
        problems.append(f"sends without their receive: {sends - recvs}; "
                        f"receives without their send: {recvs - sends}")
    for p in problems[:20]:
        print("PROBLEM:", p)
    print(f"{len(ranks)} Chakra files, {sum(sends.values())} sends matched; "
          f"{'ok' if not problems else str(len(problems)) + ' problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
