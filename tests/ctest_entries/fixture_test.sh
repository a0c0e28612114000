#!/bin/sh
# fixture_test.sh CTEST PYTHON CHECKER FIXTURE WRAPPER MARKER
# The check against a fixture build tree (fixture/CTestTestfile.cmake.in): it
# must name every "bad." entry and no "good." one, and exit 1.  Then ctest
# itself on the fixture: the unwrapped entry that prints its line and exits 3
# passes (why the check exists), the wrapped one fails.
ctest=$1 python=$2 checker=$3 fixture=$4 wrapper=$5 marker=$6
failed=0
fail() { echo "fixture_test: $*"; failed=1; }

out=$("$python" "$checker" --ctest "$ctest" --build "$fixture" --wrapper "$wrapper" \
      --marker "$marker")
status=$?
printf '%s\n' "$out"
[ "$status" -eq 1 ] || fail "the check exited $status on the fixture, expected 1"
for name in bad.pass_regex_exits_3 bad.wrapped_marker_lost bad.will_fail bad.skip_code_1 \
            bad.skip_regex bad.skip_not_passed_on; do
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
[ "$failed" -eq 0 ] && echo "fixture_test: PASS"
exit "$failed"
