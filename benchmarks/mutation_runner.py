"""The test runner mutmut calls for each mutant (benchmarks/mutate.py): pytest in a process forked
from a warm one, so that a mutant costs its tests' time, not TensorFlow's import.

mutmut writes each mutant into the tree and runs its runner command, a new process per mutant;
importing TensorFlow alone takes seconds, more than most modules' quick tests. So `serve` imports
the heavy libraries once (and nothing of tpu_graphs, which must come from the mutated file) and
listens on a Unix socket; the runner command is `client`, which asks the server to fork a child
that runs pytest on the module's tests in the mutated tree and answers with pytest's exit code.
A child whose client went away (mutmut's timeout killed it) is killed too.

    python benchmarks/mutation_runner.py serve SOCKET TREE
    python benchmarks/mutation_runner.py client SOCKET LOG MUTANT -- PYTEST_ARGUMENTS...

Each run appends one JSON line to LOG: the mutant (as mutmut's pre-mutation hook names it), the
exit code, the first failing test (which says which test kills a mutant) and the tests skipped.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

# Imported once by the server, before any fork: what the tests import that takes seconds.
PRELOADED = ("numpy", "pytest", "absl.logging", "tensorflow", "tensorflow_gnn", "tensorflow_ranking")


class _Outcome:
  """pytest plugin: the node id of the first failing test, and how many tests skipped."""

  def __init__(self):
    self.failed = None
    self.skipped = 0

  def pytest_runtest_logreport(self, report):
    if report.failed and self.failed is None:
      self.failed = report.nodeid
    self.skipped += report.skipped and report.when in ("setup", "call")


def _run_tests(tree: str, arguments: list[str], log: str, mutant: str) -> int:
  """In the forked child: pytest on `arguments` in `tree`, quietly; appends the outcome to `log`."""
  import pytest  # pylint: disable=import-outside-toplevel
  # No bytecode cache: Python trusts a .pyc whose source has the same size and mtime (in whole
  # seconds), which a mutant written within a second of the one before may well have.
  sys.dont_write_bytecode = True
  os.chdir(tree)
  sys.path[:0] = [tree, os.path.join(tree, "tests")]
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 1)
  os.dup2(null, 2)
  plugin = _Outcome()
  code = int(pytest.main([*arguments, "-x", "-q", "-p", "no:cacheprovider"], plugins=[plugin]))
  import tpu_graphs  # pylint: disable=import-outside-toplevel
  if not os.path.realpath(tpu_graphs.__file__).startswith(os.path.realpath(tree) + os.sep):
    code = 99  # the tests ran against another tree's code: never a verdict on this mutant
  with open(log, "a") as stream:
    stream.write(json.dumps({"mutant": mutant, "exit": code, "first_failure": plugin.failed,
                             "skipped": plugin.skipped}) + "\n")
  return code


def serve(socket_path: str, tree: str) -> None:
  """Answers `client` requests until killed."""
  for name in PRELOADED:
    __import__(name)
  assert not any(name.split(".")[0] == "tpu_graphs" for name in sys.modules), "tpu_graphs imported before a fork"
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  if os.path.exists(socket_path):
    os.unlink(socket_path)
  listener.bind(socket_path)
  listener.listen(1)
  print("ready", flush=True)
  while True:
    connection, _ = listener.accept()
    with connection:
      request = json.loads(connection.makefile().readline())
      child = os.fork()
      if child == 0:
        listener.close()
        code = 98
        try:
          code = _run_tests(tree, request["arguments"], request["log"], request["mutant"])
        finally:
          os._exit(code)  # pylint: disable=protected-access
      while True:
        finished, status = os.waitpid(child, os.WNOHANG)
        if finished:
          code = os.waitstatus_to_exitcode(status)
          break
        readable, _, _ = select.select([connection], [], [], 0.05)
        if readable and not connection.recv(1, socket.MSG_PEEK):  # the client is gone
          os.kill(child, signal.SIGKILL)
          os.waitpid(child, 0)
          code = None
          break
      if code is not None:
        try:
          connection.sendall(f"{code}\n".encode())
        except OSError:
          pass


def client(socket_path: str, log: str, mutant: str, arguments: list[str]) -> int:
  """Sends one request; returns 0 when the tests pass and 1 when they do not (fail, or cannot even
  be collected: a mutant that breaks the import is caught too), mutmut's only "killed". No answer
  from the server is 3, which mutmut counts as a survivor: a broken runner never kills."""
  connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    connection.connect(socket_path)
    connection.sendall((json.dumps({"arguments": arguments, "log": log, "mutant": mutant}) + "\n").encode())
    answer = connection.makefile().readline()
  except OSError as error:
    print(f"mutation_runner: no server at {socket_path} ({error})", file=sys.stderr)
    return 3
  if not answer.strip():
    return 3
  return 0 if int(answer) == 0 else 1


if __name__ == "__main__":
  if sys.argv[1] == "serve":
    serve(sys.argv[2], sys.argv[3])
  else:
    split = sys.argv.index("--")
    sys.exit(client(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[split + 1:]))
