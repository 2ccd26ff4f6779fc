"""scripts/test's tally counts test functions from each target's JUnit XML, skips included, and
never reads a target that failed as passing."""

import os
import subprocess
import sys
import time

import pytest

import tally

PASSED_CASE = '<testcase classname="tests.test_x" name="test_passes" time="0.1" />'
FAILED_CASE = '<testcase name="test_fails" time="0.1"><failure message="assert 1 == 2">...</failure></testcase>'
# A test that failed and whose fixture then failed in teardown: one failed test.
FAILED_TWICE_CASE = ('<testcase name="test_fails_then_errs" time="0.1"><failure message="a">...</failure>'
                     '<error message="teardown">...</error></testcase>')
SKIPPED_CASE = ('<testcase name="test_needs_sample" time="0.0"><skipped type="pytest.skip" '
                'message="/x/npz: the real TpuGraphs sample is not there">...</skipped></testcase>')


def _pytest_xml(*cases: str) -> str:
  return ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">' + "\n".join(cases) +
          "</testsuite></testsuites>")


PYTEST_XML = _pytest_xml(PASSED_CASE, PASSED_CASE, FAILED_CASE, FAILED_TWICE_CASE, SKIPPED_CASE, SKIPPED_CASE)

# What Bazel writes for a target that wrote no XML of its own (one case for the whole target).
BAZEL_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="native/parity" tests="1" failures="0" errors="0">
<testcase name="native/parity" status="run" duration="3" time="3"></testcase>
</testsuite></testsuites>
"""


def _testlogs(tmp_path, **xml_by_target):
  for name, text in xml_by_target.items():
    (tmp_path / "tests" / name).mkdir(parents=True)
    (tmp_path / "tests" / name / "test.xml").write_text(text)
  return tmp_path


def test_the_summary_gives_each_targets_status_and_seconds():
  targets = tally.summary(["INFO: Build completed", "//tests:test_a                (cached) PASSED in 3.1s",
                           "//native/hlo:fuzz_replay                 FAILED in 2 out of 2 in 60.0s",
                           "//tests:test_b                           FAILED TO BUILD"])
  assert [(t.label, t.status, t.cached, t.seconds) for t in targets] == [
      ("//tests:test_a", "PASSED", True, 3.1), ("//native/hlo:fuzz_replay", "FAILED", False, 60.0),
      ("//tests:test_b", "FAILED TO BUILD", False, None)]
  assert tally.slowest(targets) == "slowest: //native/hlo:fuzz_replay 60 s, //tests:test_a 3 s"


def test_each_test_function_is_counted_once_as_passed_failed_or_skipped(tmp_path):
  counted = tally.count_testcases(_testlogs(tmp_path, test_x=PYTEST_XML) / "tests/test_x/test.xml")
  assert (counted.passed, counted.failed, counted.skipped) == (2, 2, 2)
  assert counted.skip_reasons == {"/x/npz: the real TpuGraphs sample is not there": 2}


def test_targets_of_the_summary_are_summed_cached_ones_included(tmp_path):
  every_test_skipped = _pytest_xml(SKIPPED_CASE, SKIPPED_CASE, SKIPPED_CASE)  # Bazel says PASSED
  testlogs = _testlogs(tmp_path, test_a=_pytest_xml(PASSED_CASE, SKIPPED_CASE), test_b=BAZEL_XML,
                       test_c=every_test_skipped)
  summary = ["INFO: Build completed successfully", "//tests:test_a                          (cached) PASSED in 3.1s",
             "//tests:test_b                                   PASSED in 0.4s",
             "//tests:test_c                                   PASSED in 0.2s", "Executed 2 out of 3 tests"]
  result = tally.tally(summary, testlogs, started=time.time() + 3600)
  assert result.line() == "2 passed, 0 failed, 4 skipped"
  assert (result.targets, result.cached_targets) == (3, 1)


def test_a_target_that_timed_out_or_did_not_build_counts_as_failed_even_with_old_passing_xml(tmp_path):
  testlogs = _testlogs(tmp_path, test_slow=BAZEL_XML)
  old = time.time() - 3600
  os.utime(testlogs / "tests/test_slow/test.xml", (old, old))  # left by an earlier, passing run
  summary = ["//tests:test_slow                                TIMEOUT in 900.0s",
             "//tests:test_broken                              FAILED TO BUILD",
             "//tests:test_later                               NO STATUS"]
  result = tally.tally(summary, testlogs, started=time.time() - 60)
  assert result.line() == "0 passed, 2 failed, 1 skipped"
  assert result.failed_targets == ["//tests:test_slow TIMEOUT", "//tests:test_broken FAILED TO BUILD"]


def test_a_failed_target_whose_fresh_xml_shows_no_failure_still_counts_one(tmp_path):
  testlogs = _testlogs(tmp_path, test_crash=BAZEL_XML)
  result = tally.tally(["//tests:test_crash                           FAILED in 2.0s"], testlogs,
                       started=time.time() - 60)
  assert result.line() == "1 passed, 1 failed, 0 skipped"


def test_the_program_ends_with_the_tally_line_and_names_skip_reasons(tmp_path):
  testlogs = _testlogs(tmp_path, test_x=PYTEST_XML)
  completed = subprocess.run([sys.executable, tally.__file__, str(testlogs), str(time.time() - 60)],
                             input="//tests:test_x                FAILED in 1.0s\n", capture_output=True, text=True,
                             check=True)
  lines = completed.stdout.splitlines()
  assert lines[-1] == "2 passed, 2 failed, 2 skipped"
  assert "skipped 2: /x/npz: the real TpuGraphs sample is not there" in lines
  assert "failed: //tests:test_x FAILED" in lines


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
