"""The README and the guides in docs/ cannot rot: every shell block in them is either run here or
says why not, every program a block calls exists and defines the flags it is given (skipped blocks
included), every relative link resolves, every figure quoted from a benchmark result file is in
that file as written on a line that names its measure, and every result file names its command
with repository-relative paths and the commit it measured.

A figure is a link whose text holds a digit, to a result file (`benchmarks/results/*.md`):
`[0.822 ± 0.011](benchmarks/results/real_layout.md)`. It must stand, whole (not inside a
larger number or a date), on one line of that file's figures (its header lines, which hold the
date, machine, load, command and commit, do not count) that also holds a word of the figure's
measure as the document words it (the table row's first cell, the column's header and the cell's
own words; in prose, the sentence around the link), a word that singles lines out: one found on at
most half of the file's lines. So `[5.68 s]` in a row "serving ... warm SavedModel call" must come
from the line of serve.md that holds both "5.68 s" and "warm", not from anywhere in the file.

A C or C++ block (```c, ```cpp) compiles (COMPILERS; a header's excerpts with <stddef.h> and
<stdint.h>, as the header has them, and native/library/ on the include path for `tpu_graphs_model.h`).

A shell block (```sh, ```bash, ```shell, ```console) must follow a marker line, blank lines apart:

    <!-- doc-test: run -->               the block runs here, from the repository root
    <!-- doc-test: skip: <reason> -->    it does not (needs the real release, takes too long: the
                                         reason names the test that covers it, where one does)

The runnable blocks of one document run in order, each under `bash -euo pipefail`, in one scratch
copy of the repository root (its entries linked, `out/` its own), so a guide may train in one
block and rank with the result in the next, and nothing lands in the checkout. A document that
builds on another's results says so (`<!-- doc-test: after docs/training.md -->`) and starts from
a copy of that one's `out/`. The blocks run on the embedded data and each has RUN_SECONDS.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tpu_graphs.data import locations
from tpu_graphs.train import experiments

REPOSITORY = locations.REPOSITORY
RUN_SECONDS = 300  # a guard against a hang on a loaded machine; blocks take seconds to a minute
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
# A C or C++ block's language -> how the compiler is told it (cc -x ...).
COMPILERS = {"c": "c", "cpp": "c++", "c++": "c++", "cc": "c++"}
MARKER = re.compile(r"<!--\s*doc-test:\s*(?P<kind>run|skip)\s*(?::\s*(?P<reason>.*?))?\s*-->")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<language>[\w+-]*)")
# [text](target) and ![alt](target), the target up to whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A document that builds on another's runnable blocks (a guide that serves the model another trains).
AFTER = re.compile(r"<!--\s*doc-test:\s*after\s+(\S+?)\s*-->")
# A program of the repository called in a command, with what follows it on the line.
PROGRAM_CALL = re.compile(r"(?:^|\s)(?:\S*python3?\s+)(?P<program>(?:baselines|benchmarks)/\w+\.py)(?P<arguments>.*)")
FLAG_DEFINITION = re.compile(r"DEFINE_\w+\(\s*[\"'](\w+)[\"']")
# The flags training_flags.model_flags makes of a settings class, one per field.
MODEL_FLAGS_DEFINITION = re.compile(r"model_flags\(experiments\.(\w+)\)")
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "verbosity", "v", "logtostderr",
              "alsologtostderr", "log_dir", "stderrthreshold"}
# The first line of an untagged code block that is really a command.
UNTAGGED_COMMAND = re.compile(r"\s*(\$ |\.venv/|python3? |bazel |scripts/|cd |export )")
# An absolute path in a command: at its start, after a space, `=` or `,`.
ABSOLUTE_PATH = re.compile(r"(?:^|[\s=,])/\S*")
# Words that name no measure, whatever the file.
FUNCTION_WORDS = {"the", "a", "an", "of", "on", "in", "to", "and", "or", "per", "at", "by", "its", "it", "is", "as",
                  "for", "with", "from", "that", "this", "these", "than", "be", "are", "was", "each", "all", "one",
                  "two", "both", "not", "no", "into", "over", "here", "there", "which", "what", "where", "when"}
# A result file's header lines: the title line (with date, machine and load), its command and its commit.
HEADER_LINE = re.compile(r"^(Command|Commit): ")


@dataclasses.dataclass(frozen=True)
class ShellBlock:
  """A shell code block of a document: where it starts (1-based line of its fence), its text, and
  its marker ('run', 'skip' or None when it has none) with the skip reason."""
  document: pathlib.Path
  line: int
  text: str
  marker: str | None
  reason: str = ""

  def where(self) -> str:
    return f"{_shown(self.document)}:{self.line}"


def _shown(path: pathlib.Path) -> str:
  """The path relative to the repository where it is inside, else as given."""
  try:
    return str(path.relative_to(REPOSITORY))
  except ValueError:
    return str(path)


def documents(root: pathlib.Path = REPOSITORY) -> list[pathlib.Path]:
  """README.md and every docs/*.md of the repository at `root`."""
  return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _code_blocks(text: str):
  """(fence line index, language, block text) of every fenced code block, and the set of line
  indices inside fences (so links in code are not taken for links)."""
  lines, blocks, inside, index = text.splitlines(), [], set(), 0
  while index < len(lines):
    opening = FENCE.match(lines[index])
    if not opening:
      index += 1
      continue
    fence, end = opening.group("fence"), index + 1
    while end < len(lines) and not lines[end].strip().startswith(fence[0] * len(fence)):
      end += 1
    blocks.append((index, opening.group("language").lower(), "\n".join(lines[index + 1:end])))
    inside.update(range(index, end + 1))
    index = end + 1
  return blocks, inside


def shell_blocks(document: pathlib.Path) -> list[ShellBlock]:
  """Every shell block of `document` with the marker on the last non-blank line before it."""
  lines = document.read_text().splitlines()
  found = []
  for start, language, text in _code_blocks("\n".join(lines))[0]:
    if language not in SHELL_LANGUAGES:
      continue
    before = start - 1
    while before >= 0 and not lines[before].strip():
      before -= 1
    marker = MARKER.fullmatch(lines[before].strip()) if before >= 0 else None
    found.append(ShellBlock(document, start + 1, text, marker and marker.group("kind"),
                            (marker and marker.group("reason")) or ""))
  return found


def marker_problems(document: pathlib.Path) -> list[str]:
  """One line per shell block that neither runs nor says why it does not, and per code block
  without a language whose first line is a command (it would escape the check)."""
  problems = [f"{_shown(document)}:{start + 1}: a code block without a language that starts with a command; "
              "tag it ```sh" for start, language, text in _code_blocks(document.read_text())[0]
              if not language and UNTAGGED_COMMAND.match(text)]
  for block in shell_blocks(document):
    if block.marker is None:
      problems.append(f"{block.where()}: shell block without a <!-- doc-test: run --> or "
                      "<!-- doc-test: skip: <reason> --> line before it")
    elif block.marker == "skip" and not block.reason:
      problems.append(f"{block.where()}: doc-test skip without a reason")
  return problems


def compile_problems(document: pathlib.Path) -> list[str]:
  """Every C or C++ block of `document` that does not compile alone (cc -Wall -Werror, to an object
  file), with the compiler's complaint."""
  problems = []
  for start, language, text in _code_blocks(document.read_text())[0]:
    if language not in COMPILERS:
      continue
    completed = subprocess.run(["cc", "-x", COMPILERS[language], "-c", "-o", os.devnull, "-Wall", "-Werror",
                                f"-I{REPOSITORY / 'native' / 'library'}", "-include", "stddef.h", "-include", "stdint.h",
                                "-"],
                               input=text, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
      problems.append(f"{_shown(document)}:{start + 1}: the {language} block does not compile:\n{completed.stderr}")
  return problems


def measure_words(text: str) -> set[str]:
  """The words of `text` that can name a measure, lower case, a plural's final s dropped (not ss); no
  numbers (figures are matched on their own), single letters (units) or function words."""
  return {word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word for word in re.findall(r"[a-z0-9]+", text.lower())
          if not word.isdigit() and len(word) > 1 and word not in FUNCTION_WORDS}


def _without_figures(text: str) -> str:
  """`text` with every link reduced to its text (a target's path names no measure), and links
  whose text holds a digit (figures) left out."""
  return LINK.sub(lambda link: "" if re.search(r"\d", link.group("text")) else link.group("text"), text)


def _table_cell_context(lines: list[str], number: int, start: int) -> str:
  """For a link at column `start` of table row `lines[number]`: the row's first cell, the header
  cell of the link's column and the link's own cell."""
  cells = lines[number].strip().strip("|").split("|")
  column = lines[number][:start].strip().lstrip("|").count("|")
  top = number
  while top > 0 and lines[top - 1].lstrip().startswith("|"):
    top -= 1
  header = lines[top].strip().strip("|").split("|")
  return " ".join([cells[0], header[column] if column < len(header) else "", cells[min(column, len(cells) - 1)]])


def _sentence_context(lines: list[str], number: int, start: int) -> str:
  """For a link at column `start` of prose line `lines[number]`: the sentence it stands in, within
  its paragraph."""
  first, last = number, number
  while first > 0 and lines[first - 1].strip() and not lines[first - 1].lstrip().startswith(("|", "#")):
    first -= 1
  while last + 1 < len(lines) and lines[last + 1].strip() and not lines[last + 1].lstrip().startswith(("|", "#")):
    last += 1
  before = " ".join(lines[first:number] + [lines[number][:start]])
  after = " ".join([lines[number][start:]] + lines[number + 1:last + 1])
  ends = re.compile(r"(?<=[a-z)\]`*])[.;:] ")
  return ends.split(before)[-1] + " " + ends.split(after, maxsplit=1)[0]


def _is_separator(line: str) -> bool:
  return line.lstrip().startswith("|") and set(line.strip()) <= set("|-: ")


def figure_entries(result: pathlib.Path) -> tuple[list[tuple[str, str]], list[str]]:
  """A result file's figures as (text, what names it): each table cell with its row, its column's
  header and the table's caption (the line above the table), and each prose line by itself; header
  lines (title with date, machine and load; command; commit) are left out. Also the lines those
  come from, to tell which words single lines out."""
  lines = result.read_text().splitlines()
  kept = [line for index, line in enumerate(lines) if line.strip() and not HEADER_LINE.match(line)
          and not (index + 1 < len(lines) and lines[index + 1].startswith("Command: ")) and not _is_separator(line)]
  entries, header, caption = [], None, ""
  for line in kept:
    if not line.lstrip().startswith("|"):
      entries.append((line, line))
      header, caption = None, line
    elif header is None:
      header = line.strip().strip("|").split("|")
    else:
      cells = line.strip().strip("|").split("|")
      entries += [(cell, f"{caption} {header[column] if column < len(header) else ''} {line}")
                  for column, cell in enumerate(cells)]
  return entries, kept


def figure_problem(figure: str, context: str, result: pathlib.Path) -> str | None:
  """Why `figure` (a link's text) with `context` (the words around it in the document) is not quoted
  from `result`, or None when one of the result file's figures (figure_entries) holds it whole and
  is named by a word of the context that singles lines out (found on at most half of them)."""
  figure = figure.strip("`* ")
  entries, lines = figure_entries(result)
  whole = re.compile(r"(?<![\w.+-])" + re.escape(figure) + r"(?![\w]|[.,]\d)")
  holding = [naming for text, naming in entries if whole.search(text)]
  if not holding:
    return f"figure {figure!r} is not in {result.name}"
  line_words = [measure_words(line) for line in lines]
  singling = {word for word in measure_words(context)
              if 2 * sum(word in words for words in line_words) <= max(len(lines), 2)}
  if not any(singling & measure_words(naming) for naming in holding):
    return (f"figure {figure!r} is in {result.name}, but not where a word of its measure names it "
            f"({', '.join(sorted(measure_words(context))) or 'no words'})")
  return None


def link_problems(document: pathlib.Path) -> list[str]:
  """One line per relative link or image of `document` whose file or folder does not exist, and per
  figure linked to a benchmark result file (link text with a digit) that the file does not hold on
  a line naming its measure (figure_problem)."""
  text = document.read_text()
  inside_code = _code_blocks(text)[1]
  lines = text.splitlines()
  problems = []
  for number, line in enumerate(lines):
    if number in inside_code:
      continue
    for link in LINK.finditer(line):
      target = link.group("target").split("#")[0]
      if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
        continue  # an anchor in the same page, or a URL
      path = (document.parent / target).resolve()
      where = f"{_shown(document)}:{number + 1}"
      if not path.exists():
        problems.append(f"{where}: link to {target}, which does not exist")
      elif (path.parent.name == "results" and path.suffix == ".md" and re.search(r"\d", link.group("text"))
            and not re.fullmatch(r"`?[\w./-]+\.(md|png)`?", link.group("text"))):  # a figure, not a file's name
        in_table = line.lstrip().startswith("|")
        context = (_table_cell_context if in_table else _sentence_context)(lines, number, link.start())
        problem = figure_problem(link.group("text"), _without_figures(context), path)
        if problem:
          problems.append(f"{where}: {problem}")
  return problems


def result_command_problems(results_dir: pathlib.Path) -> list[str]:
  """One line per `Command:` of a benchmark result file that names an absolute path or a benchmark
  script the repository does not have, and per result file without its date and machine, a command
  or a commit."""
  problems = []
  for path in sorted(results_dir.glob("*.md")):
    if not re.match(r".*, \d{4}-\d\d-\d\d, on .*\d+ cores", path.read_text()):
      problems.append(f"{_shown(path)}: no first line naming the date and the machine")
    commands = re.findall(r"^Command: `([^`]*)`", path.read_text(), flags=re.MULTILINE)
    if not commands:
      problems.append(f"{_shown(path)}: no `Command:` line naming how it was produced")
    if not re.search(r"^Commit: [0-9a-f]{7,40}\b", path.read_text(), flags=re.MULTILINE):
      problems.append(f"{_shown(path)}: no `Commit:` line naming the commit it measured")
    for command in commands:
      script = re.match(r"python (benchmarks/(?:research/)?\w+\.py)", command)
      if not script or not (REPOSITORY / script.group(1)).is_file():
        problems.append(f"{_shown(path)}: command {command!r} names no benchmark script of the repository")
      if ABSOLUTE_PATH.search(command):
        problems.append(f"{_shown(path)}: command {command!r} names an absolute path; name it relative to the "
                        "repository")
  return problems


def defined_flags(program: pathlib.Path) -> set[str]:
  """The flags `program` accepts: its own absl definitions, those of the shared modules of
  baselines/ it imports (`from baselines import training_flags`: the training programs' flags), one
  per field of a settings class it makes flags of (training_flags.model_flags), and absl's own."""
  text = program.read_text()
  shared = [REPOSITORY / "baselines" / f"{name}.py"
            for names in re.findall(r"^from baselines import ([\w, ]+)", text, flags=re.MULTILINE)
            for name in re.findall(r"\w+", names)]
  sources = [text, *(path.read_text() for path in shared if path.is_file())]
  settings = [field.name for source in sources for name in MODEL_FLAGS_DEFINITION.findall(source)
              for field in dataclasses.fields(getattr(experiments, name))]
  return ABSL_FLAGS | set(settings) | {name for source in sources for name in FLAG_DEFINITION.findall(source)}


def flag_problems(document: pathlib.Path) -> list[str]:
  """One line per command of any shell block, run or skipped, that calls a program of baselines/ or
  benchmarks/ the repository lacks or names a flag that program does not define, so that blocks
  which cannot run here still follow renamed programs and flags."""
  problems = []
  for block in shell_blocks(document):
    for command in block.text.replace("\\\n", " ").splitlines():
      for call in PROGRAM_CALL.finditer(command):
        program = REPOSITORY / call.group("program")
        if not program.is_file():
          problems.append(f"{block.where()}: {call.group('program')} does not exist")
          continue
        known = defined_flags(program)
        arguments = re.split(r"\s(?:--|[|;#&]|&&)(?:\s|$)", " " + call.group("arguments") + " ")[0]
        for name in re.findall(r"(?:^|\s)--(\w+)", arguments):
          if name not in known and not (name.startswith("no") and name[2:] in known):
            problems.append(f"{block.where()}: {call.group('program')} has no flag --{name}")
  return problems


def scratch_root(into: pathlib.Path) -> pathlib.Path:
  """A folder that looks like the repository root to a command (every top-level entry linked) but
  where `out/` and anything else a command writes are its own."""
  into.mkdir(parents=True, exist_ok=True)
  for entry in REPOSITORY.iterdir():
    if entry.name not in {"out", ".git"} and not entry.name.startswith("bazel-"):
      (into / entry.name).symlink_to(entry)
  return into


def run_blocks(document: pathlib.Path, root: pathlib.Path, seconds: float = RUN_SECONDS) -> list[str]:
  """Runs the runnable blocks of `document` in order in `root`; one line per block that fails or
  overruns (then the rest are not run), with the end of its output."""
  environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
      [str(REPOSITORY), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])}
  for block in shell_blocks(document):
    if block.marker != "run":
      continue
    try:
      completed = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=root, env=environment,
                                 capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
      return [f"{block.where()}: still running after {seconds:.0f} s; runnable blocks must be quick"]
    if completed.returncode:
      return [f"{block.where()}: exit status {completed.returncode}\n{block.text}\n--- output:\n"
              f"{(completed.stdout + completed.stderr)[-3000:]}"]
  return []


# The checks on this repository's documents.

@pytest.mark.parametrize("document", documents(), ids=_shown)
def test_every_shell_block_runs_or_says_why_not(document):
  assert marker_problems(document) == []


@pytest.mark.parametrize("document", documents(), ids=_shown)
def test_every_relative_link_resolves_and_every_linked_figure_is_in_its_result_file(document):
  assert link_problems(document) == []


@pytest.mark.parametrize("document", documents(), ids=_shown)
def test_every_command_calls_an_existing_program_with_flags_it_defines(document):
  assert flag_problems(document) == []


@pytest.mark.parametrize("document", documents(), ids=_shown)
def test_every_c_or_cpp_block_compiles(document):
  assert compile_problems(document) == []


def test_every_result_file_names_its_command_relative_to_the_repository_and_its_commit():
  assert result_command_problems(REPOSITORY / "benchmarks" / "results") == []


def test_results_hold_only_the_quoted_tables_few_enough_to_read():
  """Journals and plots go to out/benchmarks/; what stays is what the docs quote (benchmarks.md)."""
  files = sorted(path.name for path in (REPOSITORY / "benchmarks" / "results").iterdir())
  assert len(files) <= 32 and all(name.endswith(".md") for name in files), files


def test_readme_figures_each_link_to_the_result_file_they_come_from():
  readme = (REPOSITORY / "README.md").read_text()
  table = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
  rows = [line for line in table.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
  for row in rows[1:]:
    for cell in row.strip("|").split("|")[1:]:
      if re.search(r"\d", cell):
        assert LINK.search(cell) and "benchmarks/results/" in cell, f"figure without its source: {cell!r}"


def prerequisite(document: pathlib.Path) -> pathlib.Path | None:
  """The document whose runnable blocks `document` builds on (`<!-- doc-test: after docs/x.md -->`,
  a path from the repository root), if it names one."""
  named = AFTER.search(document.read_text())
  return REPOSITORY / named.group(1) if named else None


class DocumentRuns:
  """Runs a document's runnable blocks once, after those of the document it builds on, whose
  `out/` it starts from. Called with a document, gives its scratch root and its problems."""

  def __init__(self, new_folder):
    self._new_folder = new_folder  # () -> an empty folder
    self._finished = {}

  def __call__(self, document: pathlib.Path) -> tuple[pathlib.Path, list[str]]:
    if document not in self._finished:
      root = scratch_root(self._new_folder())
      before = prerequisite(document)
      problems = self(before)[1] if before else []
      if before and (self._finished[before][0] / "out").exists():
        shutil.copytree(self._finished[before][0] / "out", root / "out", symlinks=True)
      self._finished[document] = (root, problems or run_blocks(document, root))
    return self._finished[document]


@pytest.fixture(scope="module")
def ran_documents(tmp_path_factory):
  return DocumentRuns(lambda: tmp_path_factory.mktemp("root"))


@pytest.mark.parametrize("document", [d for d in documents() if any(b.marker == "run" for b in shell_blocks(d))],
                         ids=_shown)
def test_runnable_blocks_run(document, ran_documents):
  assert ran_documents(document)[1] == []


# The checker itself: each check fails on a document that breaks it.

BROKEN_GUIDE = """# A guide

<!-- doc-test: run -->
```sh
mkdir -p out/a && echo fine > out/a/first.txt
```

<!-- doc-test: run -->
```sh
.venv/bin/python baselines/convert.py --input_directory data/generated/npz/tile/xla --output_dir out/b
```

<!-- doc-test: skip: needs the real release -->
```sh
.venv/bin/python baselines/download.py
```

```bash
echo no marker
```

```
.venv/bin/python baselines/stats.py
```

<!-- doc-test: skip -->
```sh
echo a skip without a reason
```

[here](missing.md), [a folder](.), [the web](https://example.com), [an anchor](#a-guide),
and a warm call takes [0.999](benchmarks/results/serve.md).

```python
print("[in code](not/a/link.md)")
```
"""


# A result file as benchmark_results.write leaves it: its date holds "20", its load "1.3".
SERVE_RESULT = """Serving (`benchmarks/serve.py`), 2026-12-20, on Linux x86_64, 2 cores, load average 1.3.
Command: `python benchmarks/serve.py`
Commit: 0123456789abcdef0123456789abcdef01234567

| measure | value |
|---|---:|
| layout: warm call | 5.68 s |
| layout: peak RSS of the process | 970 MB |
| tile: warm configs/s | 21,267 |
| tile: peak RSS of the process | 586 MB |
"""


@pytest.fixture
def broken_guide(tmp_path):
  (tmp_path / "benchmarks" / "results").mkdir(parents=True)
  (tmp_path / "benchmarks" / "results" / "serve.md").write_text(SERVE_RESULT)
  guide = tmp_path / "guide.md"
  guide.write_text(BROKEN_GUIDE)
  return guide


def test_checker_fails_when_a_command_of_a_runnable_block_is_broken(broken_guide, tmp_path):
  root = scratch_root(tmp_path / "root")
  problems = run_blocks(broken_guide, root)
  # A flag renamed under the guide: the program stops before writing anything, and the checker says where.
  assert len(problems) == 1 and problems[0].startswith(f"{broken_guide}:9: exit status 1\n")
  assert "input_directory" in problems[0] and not (root / "out" / "b").exists()
  assert (root / "out" / "a" / "first.txt").read_text() == "fine\n"  # the block before it ran, in the scratch root
  assert not (REPOSITORY / "out" / "a" / "first.txt").exists()


def test_a_document_builds_on_the_output_of_the_one_it_names(tmp_path):
  trains, serves = tmp_path / "trains.md", tmp_path / "serves.md"
  trains.write_text("<!-- doc-test: run -->\n```sh\nmkdir -p out && echo model > out/model.txt\n```\n")
  serves.write_text("<!-- doc-test: run -->\n```sh\ngrep model out/model.txt\n```\n")
  folders = iter(tmp_path / f"root{i}" for i in range(4))
  assert DocumentRuns(lambda: next(folders))(serves)[1][0].startswith(f"{serves}:2: exit status 2")
  serves.write_text(f"<!-- doc-test: after {trains} -->\n\n" + serves.read_text())
  runs = DocumentRuns(lambda: next(folders))
  root, problems = runs(serves)
  assert problems == [] and (root / "out" / "model.txt").read_text() == "model\n"
  assert runs(trains)[0] != root  # each keeps its own scratch root


def test_checker_fails_when_a_runnable_block_overruns(tmp_path):
  guide = tmp_path / "slow.md"
  guide.write_text("<!-- doc-test: run -->\n```sh\nsleep 30\n```\n")
  assert run_blocks(guide, tmp_path, seconds=1) == [f"{guide}:2: still running after 1 s; runnable blocks must be quick"]


def test_checker_names_a_c_block_that_does_not_compile(tmp_path):
  guide = tmp_path / "guide.md"
  guide.write_text('# A guide\n\n```c\n#include "tpu_graphs_model.h"\nfloat scores[NUM_CONFIGS];\n```\n')
  problems = compile_problems(guide)
  assert len(problems) == 1 and problems[0].startswith(f"{guide}:3: the c block does not compile:")
  assert "NUM_CONFIGS" in problems[0]


def test_checker_names_blocks_without_a_marker_or_a_reason(broken_guide):
  assert [block.marker for block in shell_blocks(broken_guide)] == ["run", "run", "skip", None, "skip"]
  assert marker_problems(broken_guide) == [
      f"{broken_guide}:22: a code block without a language that starts with a command; tag it ```sh",
      f"{broken_guide}:18: shell block without a <!-- doc-test: run --> or <!-- doc-test: skip: <reason> --> line "
      "before it",
      f"{broken_guide}:27: doc-test skip without a reason"]


def test_checker_names_renamed_programs_and_flags_even_in_blocks_it_skips(tmp_path):
  guide = tmp_path / "guide.md"
  guide.write_text("<!-- doc-test: skip: needs the real release -->\n```sh\n"
                   ".venv/bin/python baselines/layout_train.py --data_root ~/data/npz --nograph_norm \\\n"
                   "    --source nlp --searches random   # --searches: renamed\n"
                   "python benchmarks/serve.py --out out/serve.md | tee log.txt --not_a_flag_of_serve\n"
                   ".venv/bin/python baselines/convert_beam.py --input_dir d -- --runner=DirectRunner\n"
                   ".venv/bin/python baselines/layout_training.py --source nlp\n```\n")
  assert flag_problems(guide) == [f"{guide}:2: baselines/layout_train.py has no flag --searches",
                                  f"{guide}:2: baselines/layout_training.py does not exist"]


def test_checker_names_missing_link_targets_and_figures_not_in_their_file(broken_guide):
  assert link_problems(broken_guide) == [
      f"{broken_guide}:31: link to missing.md, which does not exist",
      f"{broken_guide}:32: figure '0.999' is not in serve.md"]
  broken_guide.write_text(broken_guide.read_text().replace("[0.999]", "[5.68 s]").replace("missing.md", "."))
  assert link_problems(broken_guide) == []


def test_the_readme_figures_are_refused_when_one_quotes_the_date_of_its_file(tmp_path):
  """Each figure of the README's results table, replaced by the year in its result file's date (a
  number that file holds), is refused: the date is not among the file's figures."""
  readme = (REPOSITORY / "README.md").read_text()
  table = readme.split("## Results", 1)[1].split("\n## ", 1)[0]
  links = [link for link in LINK.finditer(table) if "benchmarks/results/" in link.group("target")]
  assert len(links) >= 10
  for link in links:
    year = re.search(r", (\d{4})-\d\d-\d\d, on ", (REPOSITORY / link.group("target")).read_text()).group(1)
    wrong = tmp_path / "README.md"
    wrong.write_text(readme.replace(link.group(0), f"[{year}]({REPOSITORY / link.group('target')})", 1))
    # Written elsewhere, the README's other links resolve to nothing: only this one, given an absolute
    # target, is checked as a figure.
    figures = [problem.split(": ", 1)[1] for problem in link_problems(wrong) if ": figure " in problem]
    assert figures == [f"figure '{year}' is not in {pathlib.Path(link.group('target')).name}"]


def _figure_problems(tmp_path, document_text: str) -> list[str]:
  """link_problems of a document in `tmp_path` whose links reach SERVE_RESULT as results/serve.md."""
  (tmp_path / "results").mkdir(exist_ok=True)
  (tmp_path / "results" / "serve.md").write_text(SERVE_RESULT)
  document = tmp_path / "guide.md"
  document.write_text(document_text)
  return [problem.split(": ", 1)[1] for problem in link_problems(document)]


def test_a_figure_must_be_among_the_figures_not_in_the_date_load_or_commit(tmp_path):
  # Under the old rule (anywhere in the file) each of these passed.
  assert _figure_problems(tmp_path, "A warm call took [20](results/serve.md) s.\n") == [
      "figure '20' is not in serve.md"]
  assert _figure_problems(tmp_path, "Under load [1.3](results/serve.md), a warm call.\n") == [
      "figure '1.3' is not in serve.md"]
  assert _figure_problems(tmp_path, "Warm configs/s: [21](results/serve.md).\n") == [
      "figure '21' is not in serve.md"]  # only inside 21,267
  assert _figure_problems(tmp_path, "Commit [0123456](results/serve.md) served warm calls.\n") == [
      "figure '0123456' is not in serve.md"]


def test_a_figure_must_stand_where_its_measure_is_named(tmp_path):
  table = "| measure | figure |\n|---|---:|\n| serving: peak memory of the process | [{}](results/serve.md) |\n"
  assert _figure_problems(tmp_path, table.format("970 MB")) == []
  # 5.68 s is in the file, but on the warm call's row: nothing there names peak memory.
  assert _figure_problems(tmp_path, table.format("5.68 s")) == [
      "figure '5.68 s' is in serve.md, but not where a word of its measure names it "
      "(figure, memory, peak, process, serving)"]
  prose = "Serving a tile model, the process peaks at [{}](results/serve.md) and scores warm configs fast.\n"
  assert _figure_problems(tmp_path, prose.format("586 MB")) == []
  # In prose the sentence names the measure: another sentence's words do not count.
  assert _figure_problems(tmp_path, "A warm call is quick. It used [970 MB](results/serve.md) of disk.\n") == [
      "figure '970 MB' is in serve.md, but not where a word of its measure names it (disk, used)"]


def test_checker_names_result_files_with_absolute_paths_or_no_command_or_commit(tmp_path):
  (tmp_path / "serve.md").write_text("Serving, 2026-12-01, on Linux x86_64, 2 cores.\n"
                                     "Command: `python benchmarks/serve.py --out /tmp/serve.md`\n"
                                     "Commit: 0123456789abcdef0123456789abcdef01234567\n")
  (tmp_path / "convert.md").write_text("Converting, 2026-12-01, on Linux x86_64, 16 cores.\n"
                                       "Command: `python benchmarks/convert.py --out=out/c.md`\n"
                                       "Commit: 0123456 with uncommitted changes\n")
  (tmp_path / "research.md").write_text("Research, 2026-12-01, on Linux x86_64, 2 cores.\n"
                                        "Command: `python benchmarks/research/sim_to_real.py`\n"
                                        "Commit: 0123456 (the commit that recorded this result)\n")
  (tmp_path / "old.md").write_text("A table without its command.\n")
  assert result_command_problems(tmp_path) == [
      f"{tmp_path / 'old.md'}: no first line naming the date and the machine",
      f"{tmp_path / 'old.md'}: no `Command:` line naming how it was produced",
      f"{tmp_path / 'old.md'}: no `Commit:` line naming the commit it measured",
      f"{tmp_path / 'serve.md'}: command 'python benchmarks/serve.py --out /tmp/serve.md' names an absolute path; "
      "name it relative to the repository"]


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
