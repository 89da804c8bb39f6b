#!/usr/bin/env python3
"""Writes a CTest file that runs a GoogleTest binary's tests in chunks: up to CHUNK tests of one
suite per process, rather than one process per test.

Why: every test process of ours loads LibTorch, whose static initialisers register its operators
(about 0.3 s of CPU before the first test runs). At one process per test that was over a third of
the suite's time. A chunk holds tests of one suite only, so a failing chunk's name says where to
look, and its output names the failing test.

Usage: gtest_chunks.py EXECUTABLE CTEST_FILE CHUNK TIMEOUT_PER_TEST [SERIAL]
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


def cmake_quote(text):
    return "[==[" + text + "]==]"


def main():
    executable, ctest_file, chunk, timeout_per_test = sys.argv[1:5]
    serial = len(sys.argv) > 5 and sys.argv[5] == "SERIAL"
    chunk, timeout_per_test = int(chunk), int(timeout_per_test)
    # Tests that time compute (SERIAL) keep a process each: what one leaves behind in the process
    # (intra-op threads, pinned cores, warm caches) must not change what the next one measures.
    if serial:
        chunk = 1
    lines = []
    count = 0
    for suite, tests in list_tests(executable):
        tests = [t for t in tests if not suite.startswith("DISABLED_") and
                 not t.startswith("DISABLED_")]
        parts = [tests[i:i + chunk] for i in range(0, len(tests), chunk)]
        for index, part in enumerate(parts):
            name = suite if len(parts) == 1 else f"{suite}#{index + 1}"
            pattern = ":".join(f"{suite}.{t}" for t in part)
            lines.append(f"add_test({cmake_quote(name)} {cmake_quote(executable)} "
                         f"{cmake_quote('--gtest_filter=' + pattern)})")
            # A hang is still caught within a bounded time; a chunk's budget is its tests'.
            timeout = min(timeout_per_test * len(part), 900)
            props = f"TIMEOUT {timeout} SKIP_RETURN_CODE 77"
            if serial:
                props += " RUN_SERIAL TRUE"
            lines.append(f"set_tests_properties({cmake_quote(name)} PROPERTIES {props})")
            count += len(part)
    if count == 0:
        sys.exit(f"{executable} lists no tests")
    with open(ctest_file + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    import os
    os.replace(ctest_file + ".tmp", ctest_file)


if __name__ == "__main__":
    main()
