"""How long the test command takes on a fresh clone, as CI runs it, and its slowest targets.

  python benchmarks/test_suite.py [--slowest 10] [--out benchmarks/results/test_suite.md]

Clones this repository's HEAD into a scratch folder beside a link to the real sample (../shared),
so that the clone gets a new .venv (from the pip cache) and a new Bazel output base, and times
`bash .ci/run` there with CI=true, as CI runs it; then `scripts/test --quick` in the same clone,
with --nocache_test_results: the unit tests run again from a warm build, the inner loop of
docs/development.md. Each command's tally and Bazel's time for each target (its summary line) go
into the table; the clone's Bazel server and output base are removed afterwards.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from absl import flags

from baselines import program

from benchmarks import benchmark_results
from tpu_graphs.data import locations

_SLOWEST = flags.DEFINE_integer("slowest", 10, "How many of the slowest targets to list.")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("test_suite")), "Where the Markdown table goes.")
program.require_at_least(1, _SLOWEST)


def _tally_module():
  """tests/tally.py, which reads Bazel's summary for scripts/test (tests/ is no package)."""
  spec = importlib.util.spec_from_file_location("tally", locations.REPOSITORY / "tests" / "tally.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # its dataclasses look their module up by name
  spec.loader.exec_module(module)
  return module


def timed(command: list[str], cwd: pathlib.Path, environment: dict) -> tuple[float, list[str]]:
  """Runs `command`, echoing its output; its wall seconds and its output lines."""
  started, lines = time.perf_counter(), []
  with subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, errors="replace") as process:
    for line in process.stdout:
      print(line, end="", flush=True)
      lines.append(line.rstrip("\n"))
  return time.perf_counter() - started, lines


def main(argv):
  del argv
  tally = _tally_module()
  with tempfile.TemporaryDirectory(prefix="test_suite_") as scratch:
    clone = pathlib.Path(scratch) / "repository"
    (pathlib.Path(scratch) / "shared").symlink_to(locations.REPOSITORY.parent / "shared")
    subprocess.run(["git", "clone", "--quiet", str(locations.REPOSITORY), str(clone)], check=True)
    environment = {**os.environ, "CI": "true"}
    environment.pop("TPUGRAPHS_SAMPLE_DIR", None)  # the clone's ../shared, as on CI
    try:
      full_seconds, full = timed(["bash", ".ci/run"], clone, environment)
      quick_seconds, quick = timed(["scripts/test", "--quick", "--nocache_test_results"], clone, environment)
    finally:
      subprocess.run(["bazel", "clean", "--expunge"], cwd=clone, check=False, capture_output=True)
      shutil.rmtree(clone / ".venv", ignore_errors=True)
  targets = sorted(tally.summary(full), key=lambda target: -(target.seconds or 0))
  quick_targets = tally.summary(quick)
  body = "\n".join([
      "| command | wall time | targets | tally |", "|---|---:|---:|---|",
      f"| `bash .ci/run` on a fresh clone (new .venv, new Bazel output base) | {full_seconds / 60:.1f} min | "
      f"{len(targets)} | {full[-1]} |",
      f"| `scripts/test --quick --nocache_test_results`, then, from the warm build | {quick_seconds / 60:.1f} min | "
      f"{len(quick_targets)} | {quick[-1]} |", "",
      f"The {_SLOWEST.value} slowest targets of the full run (Bazel's time for each, two running at a time):", "",
      "| target | seconds | result | in --quick |", "|---|---:|---|---|",
      *(f"| {target.label} | {target.seconds:.0f} | {target.status} | "
        f"{'yes' if target.label in {t.label for t in quick_targets} else 'no'} |"
        for target in targets[:_SLOWEST.value] if target.seconds is not None)])
  benchmark_results.write("test_suite", "The test command's time on a fresh clone", body, _OUT.value)


if __name__ == "__main__":
  program.run(main)
