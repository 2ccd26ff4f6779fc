"""Mutation testing of the library's core (scripts/mutate, docs/development.md): do the quick tests
catch one-line bugs?

mutmut (pinned in pyproject's dev extras) puts one small change at a time into a module (an
operator, a comparison, a number, a keyword, an argument) and runs that module's quick tests
(CORE_TESTS, the one map of module -> tests); a mutant the tests pass on "survived". String
literals are not mutated: mutmut's change to a string is to wrap it in "XX", which in an error
message no test should pin, and a key or name it breaks fails everything that uses it anyway.

Each run works in a copy of the checkout under out/mutate/ (mutmut writes each mutant into the
file it tests), keeps mutmut's cache per module there (killed mutants stay killed; every survivor
is tried again in each run, so a rerun after a new test is quick), and runs the tests in
processes forked from one that has TensorFlow imported (benchmarks/mutation_runner.py). It
appends each module's outcome to a journal and writes benchmarks/results/mutation.md from every
module this commit ran: each survivor with what was done, an equivalent mutant (a change no
behaviour can show) with the line of why from benchmarks/mutation_equivalents.json, and each
mutant that survived an earlier run and is killed now with the test that kills it.

    python benchmarks/mutate.py                                   # every module of CORE_TESTS
    python benchmarks/mutate.py --module tpu_graphs/data/graphs.py   # one (repeatable)
    python benchmarks/mutate.py --report                            # the result file of what ran
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import json
import os
import pathlib
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Optional

from benchmarks import benchmark_results
from tpu_graphs.data import locations

# Each core module and its quick tests (pytest arguments from the repository root): the tests that
# exist to catch its bugs. Modules whose only tests are end to end are left out (see NOT_RUN).
CORE_TESTS = {
    "tpu_graphs/data/graphs.py": ["tests/data/test_graphs.py", "tests/data/test_npz.py"],
    "tpu_graphs/data/npz.py": ["tests/data/test_npz.py", "tests/data/test_graphs.py"],
    "tpu_graphs/data/readers.py": ["tests/data/test_readers.py"],
    "tpu_graphs/data/example_encoding.py": ["tests/data/test_example_encoding.py"],
    "tpu_graphs/data/config_dedup.py": ["tests/data/test_config_dedup.py"],
    "tpu_graphs/data/config_split.py": ["tests/data/test_config_split.py"],
    "tpu_graphs/data/predictions.py": ["tests/data/test_predictions.py", "tests/programs/test_submission.py"],
    "tpu_graphs/train/metrics.py": ["tests/train/test_metrics.py"],
    "tpu_graphs/train/losses.py": ["tests/train/test_losses.py"],
    "baselines/submission.py": ["tests/programs/test_submission.py"],
    "tpu_graphs/hlo/features.py": ["tests/hlo/test_features.py", "tests/hlo/test_feature_spec.py", "tests/hlo/test_featurize.py"],
    "tpu_graphs/hlo/candidates.py": ["tests/hlo/test_candidates.py"],
    "tpu_graphs/hlo/module_writer.py": ["tests/hlo/test_module_writer.py", "-k", "not cpp_featurizer"],
    "tpu_graphs/models/layout_preprocessing.py": ["tests/models/test_layout_preprocessing.py", "-k", "pruning"],
}
# Modules of which only some top-level functions and classes are core: the rest is mutated by no
# run (mutmut's "skipped"), and counted apart. Layout pruning is one part of layout_preprocessing.
SCOPE = {
    "tpu_graphs/models/layout_preprocessing.py": ("neighbourhood", "_grouped_edges", "_edges_of", "_positions",
                                                  "kept_data_flow", "prune_to_configurable", "Pruning"),
}
# Core modules with no quick tests of their own: what the result file says was not run, and why.
NOT_RUN: dict[str, str] = {}
MUTATION_TYPES_LEFT_OUT = "string,fstring"
WORK = locations.REPOSITORY / "out" / "mutate"
EQUIVALENTS = pathlib.Path(__file__).with_name("mutation_equivalents.json")
# mutmut's statuses that count as killed: failed tests, failed tests that took long, and a timeout
# (an endless loop the tests did notice).
KILLED = ("ok_killed", "ok_suspicious", "bad_timeout")


def _slug(module: str) -> str:
  return module.replace("/", "_").removesuffix(".py")


def _tested_files(module: str) -> list[str]:
  """What a module's verdicts depend on: the module, its test modules and the tests' shared helpers."""
  tests = locations.REPOSITORY / "tests"
  helpers = sorted(f"tests/{path.name}" for path in tests.glob("*.py") if not path.name.startswith("test_"))
  return [module, *(a for a in CORE_TESTS[module] if a.endswith(".py")), *helpers]


def fingerprint(module: str, read) -> str:
  """A digest of the module's tested files, each read by `read(relative path) -> bytes` (None: absent)."""
  digest = hashlib.sha256()
  for relative in _tested_files(module):
    digest.update(relative.encode() + b"\0" + (read(relative) or b"") + b"\0")
  return digest.hexdigest()


def _read_at(commit: str):
  """A reader of files as they are in `commit`."""
  def read(relative: str):
    shown = subprocess.run(["git", "-C", str(locations.REPOSITORY), "show", f"{commit}:{relative}"],
                           capture_output=True)
    return shown.stdout if shown.returncode == 0 else None
  return read


def _read_checkout(relative: str):
  path = locations.REPOSITORY / relative
  return path.read_bytes() if path.exists() else None


def current_entries(journal: pathlib.Path) -> list[dict]:
  """Per module, the latest journal entry that ran the module's tested files as they are in the
  checkout now (same module, tests and helpers), whatever commit it ran at; oldest first."""
  entries = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
  now = {module: fingerprint(module, _read_checkout) for module in CORE_TESTS}
  latest = {}
  for entry in entries:
    if entry["module"] not in now:  # a module no longer core, or core under another path since
      continue
    ran = entry.get("fingerprint")
    if ran is None and "with uncommitted changes" not in entry["commit"]:  # entries written before fingerprints
      ran = fingerprint(entry["module"], _read_at(entry["commit"]))
    if ran == now[entry["module"]]:
      latest[entry["module"]] = entry
  return list(latest.values())


def mutant_key(line: str, index: int) -> str:
  """A mutant's name that survives edits elsewhere in its file: its source line and its index there."""
  return f"{index}:{hashlib.sha1(line.encode()).hexdigest()[:12]}"


def copy_tree(tree: pathlib.Path) -> None:
  """The checkout's files as they are now (tracked and untracked, not ignored) copied to `tree`."""
  if tree.exists():
    shutil.rmtree(tree)
  listed = subprocess.run(["git", "-C", str(locations.REPOSITORY), "ls-files", "-z", "--cached", "--others",
                           "--exclude-standard"], capture_output=True, check=True).stdout.decode().split("\0")
  for relative in filter(None, listed):
    source = locations.REPOSITORY / relative
    if source.is_file():
      (tree / relative).parent.mkdir(parents=True, exist_ok=True)
      shutil.copy2(source, tree / relative)


def scope_lines(module: str, source: str) -> list[tuple[int, int]]:
  """The (first, last) 1-based lines of the module's SCOPE definitions, decorators included; [] for
  a module mutated whole."""
  names = SCOPE.get(module)
  if not names:
    return []
  return [(min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno)
          for node in ast.parse(source).body
          if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names]


# mutmut's hook, written into the tree: skips mutants outside the module's scope, and names the
# mutant in the runner command, so that the runner's log says which test killed which mutant.
_HOOK = '''import hashlib
SCOPE = __SCOPE__
def pre_mutation(context):
    if SCOPE and not any(first <= context.mutation_id.line_number + 1 <= last for first, last in SCOPE):
        context.skip = True
        return
    line = context.mutation_id.line
    key = "%d:%s" % (context.mutation_id.index, hashlib.sha1(line.encode()).hexdigest()[:12])
    context.config.test_command = context.config.test_command.replace(" baseline -- ", " %s -- " % key)
'''


def mutants_of(cache: pathlib.Path, module: str, source: str) -> list[dict]:
  """Every mutant mutmut's cache holds for `module`: line number, original and mutated line, status."""
  import mutmut  # pylint: disable=import-outside-toplevel
  rows = sqlite3.connect(cache).execute(
      "SELECT l.line, l.line_number, m.\"index\", m.status FROM Mutant m JOIN Line l ON m.line = l.id "
      "JOIN SourceFile s ON l.sourcefile = s.id WHERE s.filename = ? ORDER BY l.line_number, m.\"index\"",
      (module,)).fetchall()
  lines = source.splitlines()
  found = []
  for line, line_number, index, status in rows:
    context = mutmut.Context(source=source, filename=module,
                             mutation_id=mutmut.RelativeMutationID(line, index, line_number))
    mutated = mutmut.mutate(context)[0].splitlines()
    if len(mutated) == len(lines):
      changed = [i for i in range(len(lines)) if lines[i] != mutated[i]]
      original, mutant = (lines[changed[0]].strip(), mutated[changed[0]].strip()) if changed else (line.strip(), "")
    else:  # a line removed (a decorator)
      original, mutant = line.strip(), "(line removed)"
    found.append({"line_number": line_number + 1, "original": original, "mutant": mutant,
                  "key": mutant_key(line, index), "status": status})
  return found


def run_module(module: str, tree: pathlib.Path, python: str, minutes: Optional[float] = None) -> dict:
  """Runs mutmut on one module in `tree` (for at most `minutes`); returns its journal entry."""
  slug = _slug(module)
  cache = WORK / "caches" / f"{slug}.sqlite"
  log = WORK / "logs" / f"{slug}.jsonl"
  for folder in (cache.parent, log.parent):
    folder.mkdir(parents=True, exist_ok=True)
  tree_cache = tree / ".mutmut-cache"
  if cache.exists():
    shutil.copy2(cache, tree_cache)
    with sqlite3.connect(tree_cache) as database:  # every survivor is tried again: the verdict is this run's
      database.execute("UPDATE Mutant SET status = 'untested' WHERE status = 'bad_survived'")
  elif tree_cache.exists():
    tree_cache.unlink()
  scope = scope_lines(module, (tree / module).read_text())
  (tree / "mutmut_config.py").write_text(_HOOK.replace("__SCOPE__", repr(scope)))
  socket_path = WORK / f"{slug}.socket"
  # The copy has no ../shared beside it: the tests read the real sample where this checkout finds it.
  environment = {**os.environ, locations.SAMPLE_DIR_VARIABLE: str(locations.sample_dir()),
                 "PYTHONDONTWRITEBYTECODE": "1"}
  server = subprocess.Popen([python, str(tree / "benchmarks/mutation_runner.py"), "serve", str(socket_path),
                             str(tree)], stdout=subprocess.PIPE, text=True, cwd=tree, env=environment)
  try:
    assert server.stdout.readline().strip() == "ready", "the mutation runner's server did not start"
    runner = shlex.join([python, "benchmarks/mutation_runner.py", "client", str(socket_path), str(log), "baseline",
                         "--", *CORE_TESTS[module]])
    started = time.monotonic()
    mutmut = subprocess.Popen([python, "-m", "mutmut", "run", "--paths-to-mutate", module, "--runner", runner,
                               "--tests-dir", "tests", "--disable-mutation-types", MUTATION_TYPES_LEFT_OUT,
                               "--simple-output", "--no-progress"], cwd=tree, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
      output, _ = mutmut.communicate(timeout=minutes * 60 if minutes else None)
      timed_out = False
    except subprocess.TimeoutExpired:  # the mutants not reached stay untested, and are reported so
      # mutmut tests in a worker process of its own, which would go on: stop its whole session.
      os.killpg(mutmut.pid, signal.SIGKILL)
      output, _ = mutmut.communicate()
      timed_out = True
    seconds = time.monotonic() - started
  finally:
    server.kill()
    server.wait()
  if not timed_out and mutmut.returncode & 1:  # mutmut's fatal error (the baseline failing among them)
    raise SystemExit(f"mutate: mutmut failed on {module}:\n{output[-3000:]}")
  baselines = [entry for entry in map(json.loads, log.read_text().splitlines()) if entry["mutant"] == "baseline"]
  if baselines and baselines[-1]["skipped"]:  # mutmut itself stops when they fail
    raise SystemExit(f"mutate: {baselines[-1]['skipped']} tests of {module} skip without a mutant (is the real "
                     f"sample at {locations.sample_dir()}?): a skipped test kills nothing")
  shutil.copy2(tree_cache, cache)
  mutants = mutants_of(tree_cache, module, (tree / module).read_text())
  killers = {}
  for entry in map(json.loads, log.read_text().splitlines()):
    if entry["exit"] != 0 and entry["first_failure"]:
      killers[entry["mutant"]] = entry["first_failure"]
  for mutant in mutants:
    mutant["outside"] = bool(scope) and not any(first <= mutant["line_number"] <= last for first, last in scope)
    if mutant["status"] in KILLED and mutant["key"] in killers:
      mutant["killed_by"] = killers[mutant["key"]]
  return {"module": module, "tests": CORE_TESTS[module], "seconds": round(seconds), "mutants": mutants}


def _equivalents() -> dict[tuple[str, str, str], str]:
  return {(e["module"], e["original"], e["mutant"]): e["why"] for e in json.loads(EQUIVALENTS.read_text())}


def report(entries: list[dict], survived_before: set[tuple[str, str]]) -> str:
  """The result file's body: per module counts and score, then every survivor and what was done."""
  equivalents = _equivalents()
  latest = {entry["module"]: entry for entry in entries}
  rows, survivors, killed_later = [], [], []
  totals = collections.Counter()
  for module in CORE_TESTS:
    entry = latest.get(module)
    if entry is None:
      continue
    counts = collections.Counter()
    for mutant in entry["mutants"]:
      why = equivalents.get((module, mutant["original"], mutant["mutant"]))
      if mutant.get("outside", mutant["status"] == "skipped"):  # whatever a run with a wider scope found
        counts["outside"] += 1
      elif mutant["status"] in KILLED:
        counts["killed"] += 1
        if (module, mutant["key"]) in survived_before:
          killed_later.append((module, mutant))
      elif mutant["status"] == "bad_survived":
        counts["equivalent" if why else "survived"] += 1
        survivors.append((module, mutant, why))
      else:
        counts[mutant["status"]] += 1
    counts["mutants"] = len(entry["mutants"]) - counts["outside"]
    totals.update(counts)
    scored = counts["mutants"] - counts["equivalent"] - counts["untested"]
    scope = f" ({', '.join(SCOPE[module])})" if module in SCOPE else ""
    ran_at = entry.get("ran_at", entry["commit"]).split()[0][:7]
    rows.append(f"| `{module}`{scope} | {ran_at} | {' '.join(entry['tests'])} | {counts['mutants']} | "
                f"{counts['killed']} | {counts['equivalent']} | {counts['survived']} | {counts['untested']} | "
                f"{100 * counts['killed'] / max(scored, 1):.1f}% | {counts['outside']} | {entry['seconds']} |")
  scored = totals["mutants"] - totals["equivalent"] - totals["untested"]
  lines = ["Mutants of the core modules (mutmut, strings left out) against each module's quick tests. Score: "
           "killed / (mutants - equivalent - untested); outside: mutants of a module's parts that are not core "
           "(SCOPE), not run. Each module's row is its latest run of the module, its tests and their helpers as "
           "they are at this commit (run at: the commit it ran at, or for a run the journal has no such record of, "
           "the commit when it ended, whose tested files are the same). "
           "A mutant killed in an earlier run stays killed (mutmut's cache, out/mutate/caches/; tests are only "
           "added); every survivor is run again in each run.", "",
           "| module | run at | tests | mutants | killed | equivalent | survived | untested | score | outside "
           "| seconds |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|", *rows,
           f"| all run | | | {totals['mutants']} | {totals['killed']} | {totals['equivalent']} | "
           f"{totals['survived']} | {totals['untested']} | "
           f"{100 * totals['killed'] / max(scored, 1):.1f}% | {totals['outside']} | |", ""]
  not_run = [m for m in CORE_TESTS if m not in latest]
  untested = {e["module"]: sum(m["status"] == "untested" and not m.get("outside") for m in e["mutants"])
              for e in latest.values()}
  lines.append("Modules run: " + ", ".join(f"`{m}`" + (f" (partly: {untested[m]} mutants not reached in the time "
                                                        "given, not scored)" if untested[m] else "")
                                           for m in latest) + ".")
  lines.append("Not run on this commit's code and tests: " + (", ".join(f"`{m}`" for m in not_run) or "none")
               + "".join(f"; `{m}` ({why})" for m, why in NOT_RUN.items()) + ".")
  lines.append("Runs: " + "; ".join(sorted({f"`{e['command']}`" for e in latest.values() if "command" in e})) + ".")
  lines += ["", "## Surviving mutants", ""]
  if not survivors:
    lines.append("None.")
  for module, mutant, why in survivors:
    verdict = f"equivalent: {why}" if why else "**not killed**"
    lines.append(f"- `{module}:{mutant['line_number']}` `{mutant['original']}` -> `{mutant['mutant']}`: {verdict}")
  lines += ["", "## Killed by tests added after an earlier run", ""]
  if not killed_later:
    lines.append("None.")
  for module, mutant in killed_later:
    lines.append(f"- `{module}:{mutant['line_number']}` `{mutant['original']}` -> `{mutant['mutant']}`: "
                 f"{mutant.get('killed_by', 'killed')}")
  return "\n".join(lines)


def _history_path(module: str) -> pathlib.Path:
  """Where the mutants of `module` that ever survived are kept: mutant key -> the commit it survived."""
  return WORK / "survivors" / f"{_slug(module)}.json"


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--module", action="append", choices=sorted(CORE_TESTS),
                      help="a core module to mutate (repeatable); default: all of them")
  parser.add_argument("--minutes", type=float, help="stop each module after this long; the mutants not reached "
                      "are reported untested, and the next run goes on with them (mutmut's cache)")
  parser.add_argument("--report", action="store_true", help="run nothing: write the result file from the latest run "
                      "of each module on its code and tests as they are now (runs of several modules at once each "
                      "write it when they end)")
  parser.add_argument("--out", default=benchmark_results.default_path("mutation"))
  arguments = parser.parse_args()
  journal = benchmark_results.working_path(arguments.out, ".jsonl")
  for module in [] if arguments.report else arguments.module or CORE_TESTS:
    print(f"mutate: {module} against {' '.join(CORE_TESTS[module])}", flush=True)
    tree = WORK / "trees" / _slug(module)  # one per module: runs of different modules may overlap
    ran_at = benchmark_results.commit()
    copy_tree(tree)
    ran = fingerprint(module, lambda relative: (tree / relative).read_bytes() if (tree / relative).exists() else None)
    entry = run_module(module, tree, sys.executable, arguments.minutes)
    benchmark_results.append_to_journal(journal, {**entry, "command": benchmark_results.command("mutate"),
                                                  "fingerprint": ran, "ran_at": ran_at})
    survived = [m for m in entry["mutants"] if m["status"] == "bad_survived"]
    history_path = _history_path(module)
    history = json.loads(history_path.read_text()) if history_path.exists() else {}
    for mutant in survived:
      history.setdefault(mutant["key"], benchmark_results.commit())
    history_path.parent.mkdir(parents=True, exist_ok=True)
    history_path.write_text(json.dumps(history, indent=1))
    print(f"mutate: {module}: {len(entry['mutants'])} mutants, {len(survived)} survived, {entry['seconds']} s",
          flush=True)
  entries = current_entries(journal)
  survived_before = {(module, key) for module in CORE_TESTS if _history_path(module).exists()
                     for key in json.loads(_history_path(module).read_text())}
  benchmark_results.write("mutate", "Mutation testing of the core modules", report(entries, survived_before),
                          arguments.out)


if __name__ == "__main__":
  main()
