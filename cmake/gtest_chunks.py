#!/usr/bin/env python3
"""Writes a CTest file that runs a GoogleTest binary's tests in chunks: up to CHUNK tests of one
suite per process, rather than one process per test.

Why: every test process of ours loads LibTorch, whose static initialisers register its operators
(about 0.5 s of CPU before the first test runs). At one process per test that was over a third of
the suite's time. A chunk's name says where to look (its suite, or the suites it joins), and its
output names the failing test.

How: a suite is cut into parts of CHUNK tests, or into at most MOST_PARTS parts when it has more
(a suite of hundreds of cases is a parameter sweep of quick ones: 1,638 collective cases in 210
processes spent 120 s starting them and 24 s testing). Parts smaller than CHUNK join their
neighbours, suite after suite, up to CHUNK tests a process.

Usage: gtest_chunks.py EXECUTABLE CTEST_FILE CHUNK TIMEOUT_PER_TEST [ONE_PER_PROCESS]
"""
import subprocess
import sys


def list_tests(executable):
    out = subprocess.run([executable, "--gtest_list_tests"], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    suites = []  # [(suite, [test, ...])] in the binary's order
    for line in out.splitlines():
        if not line.strip() or line.startswith("Running main()"):
            continue
        name = line.split("#", 1)[0].rstrip()  # drop "  # GetParam() = ..."
        if not line.startswith(" "):
            suites.append((name.rstrip("."), []))
        elif suites:
            suites[-1][1].append(name.strip())
    return suites


# A suite of more tests than CHUNK x MOST_PARTS is cut into MOST_PARTS parts.
MOST_PARTS = 8


def joined_name(suites):
    """One suite's name, or the suites a chunk joins ("A+B+C"), shortened past a few."""
    if len(suites) <= 3:
        return "+".join(suites)
    return f"{suites[0]}+{suites[1]}+{len(suites) - 2} more"


def cmake_quote(text):
    return "[==[" + text + "]==]"


def main():
    executable, ctest_file, chunk, timeout_per_test = sys.argv[1:5]
    alone = len(sys.argv) > 5 and sys.argv[5] == "ONE_PER_PROCESS"
    chunk, timeout_per_test = int(chunk), int(timeout_per_test)
    # Tests that time compute keep a process each: what one leaves behind in the process
    # (intra-op threads, pinned cores, warm caches) must not change what the next one measures.
    # They share the machine with other tests as any other does: a physics test holds beside a
    # busy core (they passed three times beside two busy loops on two cores).
    if alone:
        chunk = 1
    lines = []
    count = 0
    pending = []  # [(suite, [test, ...])] of small parts waiting to fill a chunk

    def emit(name, parts):
        nonlocal count
        pattern = ":".join(f"{suite}.{t}" for suite, tests in parts for t in tests)
        size = sum(len(tests) for _, tests in parts)
        lines.append(f"add_test({cmake_quote(name)} {cmake_quote(executable)} "
                     f"{cmake_quote('--gtest_filter=' + pattern)})")
        # A hang is still caught within a bounded time; a chunk's budget is its tests'.
        timeout = min(timeout_per_test * size, 900)
        props = f"TIMEOUT {timeout} SKIP_RETURN_CODE 77"
        lines.append(f"set_tests_properties({cmake_quote(name)} PROPERTIES {props})")
        count += size

    def flush():
        if pending:
            emit(joined_name([suite for suite, _ in pending]), list(pending))
            pending.clear()

    for suite, tests in list_tests(executable):
        tests = [t for t in tests if not suite.startswith("DISABLED_") and
                 not t.startswith("DISABLED_")]
        if not tests:
            continue
        size = max(chunk, -(-len(tests) // MOST_PARTS))
        parts = [tests[i:i + size] for i in range(0, len(tests), size)]
        if len(parts) > 1 or len(tests) >= chunk:
            flush()
            for index, part in enumerate(parts):
                emit(suite if len(parts) == 1 else f"{suite}#{index + 1}", [(suite, part)])
            continue
        if sum(len(t) for _, t in pending) + len(tests) > chunk:
            flush()
        pending.append((suite, tests))
    flush()
    if count == 0:
        sys.exit(f"{executable} lists no tests")
    with open(ctest_file + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    import os
    os.replace(ctest_file + ".tmp", ctest_file)


if __name__ == "__main__":
    main()
