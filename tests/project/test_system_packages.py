"""Every system tool, library and header the project uses comes from scripts/system_packages.txt.

The list is what scripts/setup, scripts/test and scripts/fuzz install on a new machine. These tests
read what the build and the documented commands use (the BUILD files' genrule commands, linkopts
and sanitizer flags, the model library's link command, the C and C++ programs the tests and
benchmarks compile, the native sources' and the docs' system headers, the commands of the docs'
shell blocks) and fail naming anything the list does not provide. They never look at what this
machine has installed, so a package installed by hand cannot hide a missing line.
"""

import ast
import os
import pathlib
import re
import subprocess

import pytest

from tpu_graphs.export.aot import layout_shapes
from tpu_graphs.export.aot import native_library
from tpu_graphs.export.aot import tile_shapes

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE_LIST = REPO / "scripts/system_packages.txt"

# Programs every Debian system has whatever is installed (its Essential packages: coreutils, bash,
# sed, grep, findutils, tar, gzip, diffutils, debianutils, libc-bin's ldd, dpkg, apt), and
# the shell's own words.
ESSENTIAL = {
    "[", "apt-get", "basename", "bash", "cat", "cd", "chmod", "cmp", "cp", "cut", "date", "diff", "dirname", "dpkg",
    "echo", "env", "exit", "export", "false", "find", "grep", "gzip", "head", "ldd", "ln", "ls", "mkdir", "mktemp",
    "mv", "printf", "pwd", "read", "rm", "sed", "set", "sh", "sha256sum", "sleep", "sort", "tail", "tar", "tee",
    "test", "time", "touch", "true", "uniq", "wc", "xargs",
}
SHELL_KEYWORDS = {"case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then", "until", "while"}


def provided() -> dict[str, str]:
  """'kind:name' -> the package of scripts/system_packages.txt that provides it."""
  provides = {}
  for number, line in enumerate(PACKAGE_LIST.read_text().splitlines(), 1):
    if not line.strip() or line.startswith("#"):
      continue
    package, script, *items = line.split()
    assert script in ("setup", "fuzz"), f"{PACKAGE_LIST}:{number}: unknown script {script!r}"
    for item in items:
      assert re.fullmatch(r"(tool|lib|header|sanitizer|file):\S+", item), f"{PACKAGE_LIST}:{number}: {item!r}"
      provides[item] = package
  return provides


def _starlark_files() -> list[pathlib.Path]:
  roots = [REPO / "BUILD", *REPO.glob("*.bzl")]
  for folder in ("native", "tests", "benchmarks", "baselines", "data", "third_party", "tpu_graphs"):
    roots += [*(REPO / folder).rglob("BUILD"), *(REPO / folder).rglob("*.BUILD"), *(REPO / folder).rglob("*.bzl")]
  return sorted(set(roots))


def _strings(node: ast.AST) -> list[str]:
  """The string constants in an expression, in order (a genrule's cmd built by + and %)."""
  if isinstance(node, ast.Constant):
    return [node.value] if isinstance(node.value, str) else []
  return [text for child in ast.iter_child_nodes(node) for text in _strings(child)]


def genrule_commands() -> list[tuple[str, str]]:
  """(file, command text) of every genrule in the BUILD files."""
  commands = []
  for path in _starlark_files():
    for call in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "genrule":
        for keyword in call.keywords:
          if keyword.arg == "cmd":
            commands.append((str(path.relative_to(REPO)), " ".join(_strings(keyword.value))))
  return commands


def shell_programs(command: str) -> set[str]:
  """The programs a shell command line runs: the first word of each simple command, Bazel's make
  variables ($(location x), $@) and shell variables left out."""
  command = re.sub(r"(?<!\$)\$\((locations?|execpaths?|rootpaths?|RULEDIR|GENDIR|BINDIR)[^)]*\)", " FILE ", command)
  command = command.replace("$$", "$")
  programs = set()
  for part in re.split(r"&&|\|\||[;|()`\n]|\$\(", command):
    words = [word for word in part.split() if not re.fullmatch(r"\w+=\S*", word)]
    while words and words[0] in SHELL_KEYWORDS:
      words = words[1:] if words[0] not in ("for", "case") else []  # for x in ...; case x in ...
    if words and re.fullmatch(r"[\w.+-]+", words[0]) and words[0] != "FILE":
      programs.add(words[0])
  return programs


def _module_strings(path: pathlib.Path) -> dict[str, str]:
  tree = ast.parse(path.read_text(), str(path))
  return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
          for target in node.targets if isinstance(target, ast.Name)
          and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def compiled_commands() -> list[tuple[str, list[str]]]:
  """(file, argument list) of every command the Python code runs whose program is a string (the
  C and C++ programs the tests and benchmarks compile, g++ and clang++ among them): each
  subprocess call's list literal, a module-level string constant as its first word resolved."""
  commands = []
  for path in sorted([*(REPO / "tests").glob("*.py"), *(REPO / "benchmarks").rglob("*.py"),
                      *(REPO / "tpu_graphs").rglob("*.py"), *(REPO / "baselines").glob("*.py")]):
    constants = _module_strings(path)
    for call in ast.walk(ast.parse(path.read_text(), str(path))):
      if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
              and call.func.attr in ("run", "Popen", "check_call", "check_output") and call.args
              and isinstance(call.args[0], ast.List) and call.args[0].elts):
        continue
      first = call.args[0].elts[0]
      program = first.value if isinstance(first, ast.Constant) else constants.get(getattr(first, "id", ""))
      if isinstance(program, str):
        commands.append((str(path.relative_to(REPO)), [program, *_strings(call.args[0])[1:]]))
  return commands


def flag_strings() -> list[tuple[str, str]]:
  """(file, flag) of every -lNAME and -fsanitize= string in the BUILD files and the Python code."""
  flags = []
  for path in [*_starlark_files(), *sorted((REPO / "tests").glob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py")),
               *sorted((REPO / "tpu_graphs").rglob("*.py"))]:
    for text in _strings(ast.parse(path.read_text(), str(path))):  # a flag is a whole argument: "-lz"
      if re.fullmatch(r"-l[\w+-]+|-fsanitize=[\w,-]+", text):
        flags.append((str(path.relative_to(REPO)), text))
  return flags


def docs() -> list[pathlib.Path]:
  return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def doc_blocks(language: str) -> list[tuple[str, str]]:
  """(file, text) of every fenced code block of `language` ('sh', 'c' or 'cpp') in the docs."""
  names = {"sh": ("sh", "bash", "shell"), "c": ("c", "cpp", "c++", "cc")}[language]
  return [(path.name, match.group(2)) for path in docs()
          for match in re.finditer(r"^```(\S*)\n(.*?)^```", path.read_text(), re.S | re.M) if match.group(1) in names]


def doc_command_lines(text: str) -> list[str]:
  """The command lines of a shell block: heredoc bodies and continuation lines left out."""
  lines, heredoc, continued = [], None, False
  for line in text.splitlines():
    if heredoc is not None:
      heredoc = None if line.strip() == heredoc else heredoc
      continue
    if not continued:
      lines.append(line.split(" #")[0] if not line.lstrip().startswith("#") else "")
    continued = line.rstrip().endswith("\\")
    opened = re.search(r"<<-?\s*'?\"?(\w+)", line)
    heredoc = opened.group(1) if opened else None
  return lines


def system_headers(text: str) -> set[str]:
  return set(re.findall(r"^\s*#\s*include\s*<([^>]+)>", text, re.M))


def _unprovided(used: dict[str, set[str]], kind: str) -> list[str]:
  have = provided()
  return sorted(f"{kind}:{name} (used by {', '.join(sorted(where))})"
                for name, where in used.items() if f"{kind}:{name}" not in have)


def _collect(pairs) -> dict[str, set[str]]:
  used: dict[str, set[str]] = {}
  for where, name in pairs:
    used.setdefault(name, set()).add(where)
  return used


def _tools_used() -> dict[str, set[str]]:
  pairs = [(where, program) for where, command in genrule_commands() for program in shell_programs(command)]
  pairs += [(where, command[0]) for where, command in compiled_commands() if "/" not in command[0]]
  for where, text in doc_blocks("sh"):
    for line in doc_command_lines(text):
      pairs += [(where, program) for program in shell_programs(line) if "/" not in program]
  pairs += [("tpu_graphs/export/aot/native_library.py", _model_library_link_command(kind)[0]) for kind in ("tile", "layout")]
  return _collect((where, tool) for where, tool in pairs if tool not in ESSENTIAL | SHELL_KEYWORDS)


def _model_library_link_command(kind: str) -> list[str]:
  bucket = (layout_shapes.LayoutBucket(prune_hops=0, nodes=64, edges=128, configurable=8, configs=64) if kind == "layout"
            else tile_shapes.TileBucket(nodes=16, edges=32, configs=128, split=True))
  scratch = pathlib.Path("/scratch")
  return native_library.link_command(scratch, scratch / "aot", [bucket], ["x86-64-v3"], scratch / "runtime.a",
                                     scratch / "featurizer.a", scratch / "include", scratch / "out.so")


def test_the_package_list_names_each_package_once_and_each_item_once():
  packages = [line.split()[0] for line in PACKAGE_LIST.read_text().splitlines()
              if line.strip() and not line.startswith("#")]
  assert len(packages) == len(set(packages))
  items = [item for line in PACKAGE_LIST.read_text().splitlines() if line.strip() and not line.startswith("#")
           for item in line.split()[2:]]
  assert len(items) == len(set(items)) == len(provided())


def test_shell_programs_finds_each_command_of_a_genrule_line():
  # The shape of native/hlo/BUILD's protos_cc: command substitution, &&, ; and make variables.
  command = ("descriptors=$$(mktemp) && protoc --encode=x < $(location a.textproto) > $$descriptors && "
             "for f in $(locations b); do case $$f in *.a) cp $$f $@;; esac; done; xxd -i $@; status=$$?; exit $$status")
  assert shell_programs(command) == {"mktemp", "protoc", "cp", "xxd", "exit"}


def test_every_program_a_genrule_runs_is_provided():
  commands = genrule_commands()
  assert any("protoc" in shell_programs(command) for _, command in commands), "protos_cc not read"
  missing = _unprovided(_collect((where, program) for where, command in commands for program in shell_programs(command)
                                 if program not in ESSENTIAL | SHELL_KEYWORDS), "tool")
  assert not missing, f"add the Debian packages providing these to {PACKAGE_LIST.name}: {missing}"


def test_every_compiler_and_tool_the_code_and_the_docs_run_is_provided():
  used = _tools_used()
  assert {"g++", "gcc", "clang++", "protoc", "bazel"} <= set(used), sorted(used)
  missing = _unprovided(used, "tool")
  assert not missing, f"add the Debian packages providing these to {PACKAGE_LIST.name}: {missing}"


@pytest.mark.parametrize("kind", ["tile", "layout"])
def test_the_model_library_link_command_links_only_provided_libraries(kind):
  command = _model_library_link_command(kind)
  have = provided()
  assert f"tool:{command[0]}" in have
  libraries = [flag[2:] for flag in command if flag.startswith("-l")]
  assert "protobuf-lite" in libraries
  assert [library for library in libraries if f"lib:{library}" not in have] == []


def test_every_linked_library_and_sanitizer_is_provided():
  flags = flag_strings()
  # The project's own model library (-ltpu_graphs_model) is built here, not installed.
  own = native_library.LIBRARY_NAME.removeprefix("lib").removesuffix(".so")
  used_libraries = _collect((where, flag[2:]) for where, flag in flags if flag.startswith("-l") and flag[2:] != own)
  used_sanitizers = _collect((where, sanitizer) for where, flag in flags if flag.startswith("-fsanitize=")
                             for sanitizer in flag.split("=", 1)[1].split(","))
  assert {"z", "protobuf-lite"} <= set(used_libraries) and {"address", "thread"} <= set(used_sanitizers)
  missing = _unprovided(used_libraries, "lib") + _unprovided(used_sanitizers, "sanitizer")
  assert not missing, f"add the Debian packages providing these to {PACKAGE_LIST.name}: {missing}"


def test_every_system_header_outside_the_cpp_standard_library_is_provided():
  sources = [*(REPO / "native").rglob("*.cc"), *(REPO / "native").rglob("*.h"), *(REPO / "tests").glob("*.c"),
             *(REPO / "tests").glob("*.cc")]
  pairs = [(str(path.relative_to(REPO)), header) for path in sources for header in system_headers(path.read_text())]
  pairs += [(where, header) for where, text in doc_blocks("c") for header in system_headers(text)]
  used = _collect(pairs)
  assert "zlib.h" in used
  # <vector>, <cstdint>: the C++ standard library, g++'s; every header with a suffix is named.
  assert "tool:g++" in provided()
  missing = _unprovided({header: where for header, where in used.items() if "." in header}, "header")
  assert not missing, f"add the Debian packages providing these to {PACKAGE_LIST.name}: {missing}"


def test_every_system_file_a_genrule_reads_is_provided():
  # protos_cc reads protobuf's own descriptor.proto from /usr/include (--proto_path=/usr/include).
  have = provided()
  for where, command in genrule_commands():
    for root, name in re.findall(r"--proto_path=(/\S+) (\S+\.proto)", command):
      assert f"file:{root}/{name}" in have, f"{where} reads {root}/{name}; add its package to {PACKAGE_LIST.name}"


def test_setup_refuses_a_python_without_tensorflow_wheels_in_one_line(tmp_path):
  # A stand-in for Python 3.12 (none is installed here): it answers setup's version query.
  fake = tmp_path / "python3.12"
  fake.write_text("#!/bin/sh\necho 3.12\n")
  fake.chmod(0o755)
  completed = subprocess.run(["bash", str(REPO / "scripts/setup")], env={**os.environ, "PYTHON": str(fake)},
                             capture_output=True, text=True, timeout=60)
  assert completed.returncode == 1 and completed.stdout == ""
  assert len(completed.stderr.splitlines()) == 1, completed.stderr
  assert f"PYTHON={fake} is Python 3.12; the project needs Python 3.9 to 3.11" in completed.stderr
