#!/bin/sh
# fixture_test.sh CTEST PYTHON CHECKER FIXTURE WRAPPER MARKER ERROR_LINE ALLOW_LABEL
# The check against a fixture build tree (fixture/CTestTestfile.cmake.in): it
# must name every "bad." entry and no "good." one, and exit 1.  Then ctest
# itself on the fixture: the unwrapped entry that prints its line and exits 3
# passes (why the check exists), the wrapped one fails; an entry that prints
# an error line of Transit's log and exits 0 passes without the error-line
# expression and fails with it, and passes with the allowance label.
ctest=$1 python=$2 checker=$3 fixture=$4 wrapper=$5 marker=$6 error_line=$7 allow_label=$8
failed=0
fail() { echo "fixture_test: $*"; failed=1; }

out=$("$python" "$checker" --ctest "$ctest" --build "$fixture" --wrapper "$wrapper" \
      --marker "$marker" --error-line "$error_line" --allow-label "$allow_label")
status=$?
printf '%s\n' "$out"
[ "$status" -eq 1 ] || fail "the check exited $status on the fixture, expected 1"
for name in bad.pass_regex_exits_3 bad.wrapped_marker_lost bad.will_fail bad.skip_code_1 \
            bad.skip_regex bad.skip_not_passed_on bad.error_line_unchecked; do
  printf '%s\n' "$out" | grep -q "^check_ctest_entries: $name: " || fail "the check missed $name"
done
if printf '%s\n' "$out" | grep -q "^check_ctest_entries: good\."; then
  fail "the check refused a good entry"
fi

run=$("$ctest" --test-dir "$fixture" -R 'exits_3$' -E marker_lost 2>&1)
printf '%s\n' "$run"
printf '%s\n' "$run" | grep -Eq 'bad\.pass_regex_exits_3 [.]* +Passed' ||
  fail "ctest did not pass bad.pass_regex_exits_3: the fixture no longer shows the blind spot"
printf '%s\n' "$run" | grep -Eq 'good\.wrapped_exits_3 [.]*\*+Failed' ||
  fail "ctest did not fail good.wrapped_exits_3, whose program exits 3"

run=$("$ctest" --test-dir "$fixture" -R 'error_line|warning_line|logs_errors' 2>&1)
printf '%s\n' "$run"
expect() {
  printf '%s\n' "$run" | grep -Eq "$1 [.*]* *$2" || fail "ctest did not say $2 for $1"
}
expect 'bad\.error_line_unchecked' Passed
expect 'good\.error_line_exits_0' Failed
expect 'good\.error_line_no_rank_exits_0' Failed
expect 'good\.warning_line_exits_0' Passed
expect 'good\.logs_errors_on_purpose' Passed
[ "$failed" -eq 0 ] && echo "fixture_test: PASS"
exit "$failed"
