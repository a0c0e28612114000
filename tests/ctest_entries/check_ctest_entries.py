#!/usr/bin/env python3
"""Fails when a ctest entry of a build tree could pass although its program
failed.

ctest ignores an entry's exit status once it has a PASS_REGULAR_EXPRESSION;
WILL_FAIL turns a crash into a pass; SKIP_RETURN_CODE and
SKIP_REGULAR_EXPRESSION turn a status or a line into a skip whatever the
status.  So every entry must be one of:
  - without those properties (ctest checks the exit status), or
  - registered by transit_add_status_test: its command is the wrapper
    (tests/exit_status_is.sh) and the wrapper's failure line is among its
    FAIL_REGULAR_EXPRESSIONs;
and, besides:
  - no WILL_FAIL (a test that expects a failure names its status instead);
  - SKIP_RETURN_CODE only 77, the suite's "nothing to test here";
  - SKIP_REGULAR_EXPRESSION only GoogleTest's own skip line, which
    gtest_discover_tests sets on every case;
  - the expression of an error line of Transit's log among its
    FAIL_REGULAR_EXPRESSIONs (so it fails when its program logs an error,
    set by transit_fail_on_error_lines), unless it has the label logs_errors
    (it provokes failures on purpose).

usage: check_ctest_entries.py --ctest CTEST --build DIR --wrapper PATH --marker TEXT
                              --error-line REGEX --allow-label LABEL
Prints one line per offending entry and exits 1 if there is any, 0 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys

SKIP_CODE = "77"
GTEST_SKIP_LINE = "\\[  SKIPPED \\]"


def as_list(value):
    return value if isinstance(value, list) else [value]


def problems(test, wrapper, marker, error_line, allow_label):
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    command = test.get("command", [])
    wrapped = bool(command) and os.path.realpath(command[0]) == wrapper
    found = []
    if wrapped:
        if marker not in as_list(props.get("FAIL_REGULAR_EXPRESSION", [])):
            found.append("runs under exit_status_is.sh, but its FAIL_REGULAR_EXPRESSION "
                         f"lost the line \"{marker}\" (set by transit_add_status_test)")
    elif "PASS_REGULAR_EXPRESSION" in props:
        found.append("has a PASS_REGULAR_EXPRESSION, so ctest ignores its exit status: "
                     "register it with transit_add_status_test")
    if str(props.get("WILL_FAIL", "")).upper() in ("1", "ON", "TRUE", "YES", "Y"):
        found.append("has WILL_FAIL, which passes a crash: name the expected exit status "
                     "with transit_add_status_test")
    if "SKIP_RETURN_CODE" in props:
        code = str(props["SKIP_RETURN_CODE"])
        if code != SKIP_CODE:
            found.append(f"has SKIP_RETURN_CODE {code}: only {SKIP_CODE} means skipped here")
        elif wrapped and command[1:3] != ["--skip", code]:
            found.append(f"has SKIP_RETURN_CODE {code}, but its wrapper does not pass {code} on")
    if "SKIP_REGULAR_EXPRESSION" in props:
        skips = as_list(props["SKIP_REGULAR_EXPRESSION"])
        if skips != [GTEST_SKIP_LINE]:
            found.append(f"has SKIP_REGULAR_EXPRESSION {skips}, which skips whatever the "
                         "exit status: exit 77 instead")
    labels = as_list(props.get("LABELS", []))
    if (allow_label not in labels
            and error_line not in as_list(props.get("FAIL_REGULAR_EXPRESSION", []))):
        found.append("passes with an error line of Transit's log in its output: its "
                     "directory calls transit_fail_on_error_lines, or it has the label "
                     f"{allow_label} if it provokes errors on purpose")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctest", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--wrapper", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--error-line", required=True)
    parser.add_argument("--allow-label", required=True)
    args = parser.parse_args()
    listing = subprocess.run([args.ctest, "--test-dir", args.build, "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    tests = json.loads(listing).get("tests", [])
    wrapper = os.path.realpath(args.wrapper)
    bad = 0
    allowed = 0
    for test in tests:
        for what in problems(test, wrapper, args.marker, args.error_line, args.allow_label):
            print(f"check_ctest_entries: {test['name']}: {what}")
            bad += 1
        labels = [p["value"] for p in test.get("properties", []) if p["name"] == "LABELS"]
        if labels and args.allow_label in as_list(labels[0]):
            allowed += 1
    print(f"check_ctest_entries: {len(tests)} entries, {allowed} labelled {args.allow_label}, "
          f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
