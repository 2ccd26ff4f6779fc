"""The tally scripts/test ends with: test functions passed, failed and skipped.

Bazel's own summary counts targets, one line each (`//tests/data:test_npz  (cached) PASSED in 3.1s`); a
target whose every test skipped reads PASSED there. So the tally reads, for each target of that
summary, the JUnit XML it left (bazel-testlogs/<package>/<target>/test.xml: pytest's, written
through tests/conftest.py, or the one Bazel writes for a target that wrote none), cached results
included, and sums its <testcase>s. A target that failed without a failing test case in fresh XML
(it timed out, crashed or did not build) counts as one failed test; a skip's reason is listed, and
so are the slowest targets.

  python tests/tally.py <bazel-testlogs> <started, seconds since the epoch> < <bazel test's output>
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re
import sys
import xml.etree.ElementTree as ElementTree

SUMMARY_LINE = re.compile(r"^//(?P<package>[^:\s]*):(?P<name>\S+)\s+(?P<cached>\(cached\) )?"
                          r"(?P<status>PASSED|FLAKY|FAILED TO BUILD|FAILED|TIMEOUT|INCOMPLETE|REMOTE FAILURE|"
                          r"NO STATUS|SKIPPED)(?: in (?:\d+ out of \d+ in )?(?P<seconds>[\d.]+)s)?")
PASSING = ("PASSED", "FLAKY")
NOT_RUN = ("NO STATUS", "SKIPPED")


@dataclasses.dataclass(frozen=True)
class TargetResult:
  """One line of Bazel's summary: `//tests/data:test_npz  (cached) PASSED in 3.1s`."""
  package: str
  name: str
  status: str
  cached: bool
  seconds: float | None  # how long the test ran (when it ran, cached or not)

  @property
  def label(self) -> str:
    return f"//{self.package}:{self.name}"


def summary(bazel_output: list[str]) -> list[TargetResult]:
  """The targets of Bazel's test summary in `bazel test`'s output lines, in its order."""
  return [TargetResult(found["package"], found["name"], found["status"], bool(found["cached"]),
                       float(found["seconds"]) if found["seconds"] else None)
          for found in map(SUMMARY_LINE.match, bazel_output) if found]


@dataclasses.dataclass
class Tally:
  passed: int = 0
  failed: int = 0
  skipped: int = 0
  targets: int = 0
  cached_targets: int = 0
  skip_reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  failed_targets: list = dataclasses.field(default_factory=list)

  def line(self) -> str:
    return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


def count_testcases(xml_path: pathlib.Path) -> Tally:
  """The test cases of one JUnit XML file: a case with <failure> or <error> failed (once, even with
  both), one with <skipped> skipped, any other passed."""
  counted = Tally()
  for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
      counted.failed += 1
    elif case.find("skipped") is not None:
      counted.skipped += 1
      skipped = case.find("skipped")
      counted.skip_reasons[(skipped.get("message") or skipped.text or "no reason given").strip()] += 1
    else:
      counted.passed += 1
  return counted


def tally(bazel_output: list[str], testlogs: pathlib.Path, started: float) -> Tally:
  """Sums the XML of every target in Bazel's summary lines (see the module docstring). XML older than
  `started` stands only for cached results: a target that ran and failed must have left its own."""
  total = Tally()
  for target in summary(bazel_output):
    total.targets += 1
    total.cached_targets += target.cached
    if target.status in NOT_RUN:
      total.skipped += 1
      total.skip_reasons[f"{target.status}: the target did not run"] += 1
      continue
    xml_path = testlogs / target.package / target.name / "test.xml"
    fresh = xml_path.is_file() and (target.cached or target.status in PASSING or xml_path.stat().st_mtime >= started)
    counted = count_testcases(xml_path) if fresh else Tally()
    if target.status not in PASSING:
      total.failed_targets.append(f"{target.label} {target.status}")
      counted.failed = max(counted.failed, 1)
    elif not fresh:
      counted.passed = 1  # passed without leaving XML: one test, as Bazel counts it
    total.passed += counted.passed
    total.failed += counted.failed
    total.skipped += counted.skipped
    total.skip_reasons.update(counted.skip_reasons)
  return total


def slowest(targets: list[TargetResult], count: int = 5) -> str:
  """'slowest: //tests:test_a 412 s, ...': the `count` targets that ran longest (cached ones included)."""
  timed = sorted((target for target in targets if target.seconds is not None), key=lambda target: -target.seconds)
  return "slowest: " + ", ".join(f"{target.label} {target.seconds:.0f} s" for target in timed[:count])


def main(argv: list[str]) -> int:
  output = sys.stdin.read().splitlines()
  result = tally(output, pathlib.Path(argv[1]), float(argv[2]))
  print(slowest(summary(output)))
  if result.cached_targets:
    print(f"({result.cached_targets} of {result.targets} targets' results are cached: their inputs did not change)")
  for reason, count in sorted(result.skip_reasons.items()):
    print(f"skipped {count}: {reason}")
  for target in result.failed_targets:
    print(f"failed: {target}")
  print(result.line())
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
