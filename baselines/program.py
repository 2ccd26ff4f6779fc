"""What every program in baselines/ shares: start in the caller's directory, quiet logs, absl flags,
flags checked as they are parsed, and expected failures reported as one line.

`bazel run` starts a program inside its runfiles tree; relative paths on the command line are
meant relative to where the user typed the command, which Bazel passes as
BUILD_WORKING_DIRECTORY.

Quiet by default: a program prints its own progress and results. TensorFlow's C++ log (the
cuDNN/cuFFT/cuBLAS registration errors and the TensorRT notice of every CPU-only start), its
Python log (Keras and tf.nest notices) and the Python warnings raised inside TensorFlow's
libraries would bury them, so they are silenced unless absl's `--verbosity` (`-v`) asks for
them: -1 shows TensorFlow's warnings, 0 its INFO lines too. TF_CPP_MIN_LOG_LEVEL is read once,
when TensorFlow loads its C++ runtime, so this module reads the flag from the command line at
import, and every program imports it before anything that imports TensorFlow. A
TF_CPP_MIN_LOG_LEVEL already in the environment is left as it is.

A failure the user can fix (an InputError from any stage: a bad file, flag, run directory or
download; an OSError: a missing, unwritable or full output path) ends the program with
`<program>: <file>: <problem>` on stderr and exit status 1, never a traceback. Anything else is a
bug and keeps its traceback.

Ctrl-C (SIGINT, which a terminal sends to the whole process group) and SIGTERM stop a program the
same way: the main thread unwinds (its `finally` blocks run, worker processes are ended, a write
in progress deletes its temporary file), and the program prints `<program>: stopped by SIGINT`
and what a rerun does, on stderr, and exits with status 128 + the signal's number. Every file is
written atomically (tpu_graphs/data/storage.py), so nothing half-written is left under a name a
rerun trusts. A program stuck in a native call that does not return ends anyway
STOP_DEADLINE_SECONDS after the signal (exit status 1).
"""

import faulthandler
import logging as python_logging
import os
import pathlib
import signal
import sys
import time
import warnings
from typing import Callable, Optional, Sequence

# Python warnings attributed to these modules (TensorFlow, TF-GNN, TF-Ranking, Keras) are
# TensorFlow's to report, not the program's.
TENSORFLOW_MODULES = r"(tensorflow\w*|keras|tf_keras)(\.|$)"


def flag_text(argv: Sequence[str], names: Sequence[str]) -> Optional[str]:
  """The text of the last of the flags `names` (absl's spellings: '--name', '-name'; '=value' or
  the next argument) in `argv`, read before flags are parsed; None where absent."""
  text = None
  arguments = iter(argv)
  for argument in arguments:
    if argument == "--":
      break
    name, equals, value = argument.partition("=")
    if any(name in (f"--{flag}", f"-{flag}") for flag in names):
      text = value if equals else next(arguments, "")
  return text


def requested_verbosity(argv: Sequence[str]) -> Optional[int]:
  """The value of `--verbosity`/`-v` in `argv` (absl's spellings), or None where it is absent or
  not an integer (absl then reports the bad value itself)."""
  try:
    return int(flag_text(argv, ("verbosity", "v")))
  except (TypeError, ValueError):
    return None


def tensorflow_log_level(verbosity: Optional[int]) -> int:
  """TF_CPP_MIN_LOG_LEVEL for an absl verbosity: 3 (errors too are hidden) when none was asked
  for; else the same threshold as absl's (-1 WARNING -> 1, 0 INFO -> 0)."""
  return 3 if verbosity is None else min(3, max(0, -verbosity))


def quiet_tensorflow(verbosity: Optional[int]) -> None:
  """Silences TensorFlow's C++ log (if TensorFlow is not loaded yet), its Python logger and the
  Python warnings of its libraries, unless `verbosity` (absl's) asks for them."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(tensorflow_log_level(verbosity)))
  if verbosity is None:
    python_logging.getLogger("tensorflow").setLevel(python_logging.ERROR)
    warnings.filterwarnings("ignore", module=TENSORFLOW_MODULES)


quiet_tensorflow(requested_verbosity(sys.argv[1:]))  # before TensorFlow loads its C++ runtime

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags  # pylint: disable=g-import-not-at-top
from absl import logging  # pylint: disable=g-import-not-at-top

from tpu_graphs.data import errors  # pylint: disable=g-import-not-at-top


def failure_line(error: BaseException) -> Optional[str]:
  """The one-line report of an expected failure ('<file>: <problem>'), or None for a bug."""
  if isinstance(error, errors.InputError):
    return str(error)
  if isinstance(error, OSError):
    problem = error.strerror or str(error)
    if error.filename is None:
      return problem
    target = f" -> {error.filename2}" if error.filename2 is not None else ""
    return f"{error.filename}{target}: {problem}"
  return None


# How long a stopped program may take to unwind before it is ended without its report.
STOP_DEADLINE_SECONDS = 8
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
  """SIGINT or SIGTERM arrived (run() installs the handler that raises it in the main thread)."""

  def __init__(self, signal_number: int):
    super().__init__(signal.Signals(signal_number).name)
    self.signal_number = signal_number


def _stop(signal_number: int, frame) -> None:
  """The handler of STOP_SIGNALS: later signals are ignored while the program unwinds, which must
  end within STOP_DEADLINE_SECONDS (faulthandler's watchdog needs no Python to run, so it also ends
  a main thread stuck in native code)."""
  del frame
  for number in STOP_SIGNALS:
    signal.signal(number, signal.SIG_IGN)
  faulthandler.dump_traceback_later(STOP_DEADLINE_SECONDS, exit=True, file=open(os.devnull, "w"))
  raise Stopped(signal_number)


def children_never_see_sigint():
  """A context in which started processes (a pool's workers) block SIGINT for good: a Ctrl-C reaches
  the whole process group, and the parent, which ends its workers (SIGTERM), reports it alone.
  The signal mask is inherited through fork and exec; this process's own SIGINT waits meanwhile."""
  return _SignalsBlocked({signal.SIGINT})


class _SignalsBlocked:

  def __init__(self, signals: set):
    self._signals, self._before = signals, None

  def __enter__(self):
    self._before = signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)

  def __exit__(self, *exception):
    signal.pthread_sigmask(signal.SIG_SETMASK, self._before)


def run(main, rerun: str = "") -> None:
  """absl's app.run, after moving to the directory `bazel run` was called from (if any); expected
  failures end the program with one line (failure_line) and exit status 1; SIGINT and SIGTERM with
  one line, `<program>: stopped by SIGINT` and `rerun` (what a rerun does), and 128 + the signal."""
  user_directory = os.environ.get("BUILD_WORKING_DIRECTORY")
  if user_directory:
    os.chdir(user_directory)
  program = pathlib.Path(sys.argv[0]).stem

  def reporting_main(argv):
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)
    try:
      return main(argv)
    except (errors.InputError, OSError) as error:
      sys.stderr.flush()
      sys.exit(f"{program}: {failure_line(error)}")
    except Stopped as stopped:
      sys.stdout.flush()
      print(f"{program}: stopped by {stopped}" + (f"; {rerun}" if rerun else ""), file=sys.stderr, flush=True)
      sys.exit(128 + stopped.signal_number)

  for number in STOP_SIGNALS:
    signal.signal(number, _stop)
  app.run(reporting_main)


def require_at_least(minimum: int, *holders: flags.FlagHolder) -> None:
  """Refuses, at parse time, a value below `minimum` for each of the integer flags `holders`."""
  for holder in holders:
    flags.register_validator(holder, lambda value: value is None or value >= minimum,
                             message=f"--{holder.name} must be at least {minimum}")


def check_flag(holder: flags.FlagHolder, check: Callable[[object], object]) -> None:
  """Validates a flag at parse time with `check(value)`, which raises ValueError saying what is wrong."""

  def valid(value) -> bool:
    try:
      check(value)
    except ValueError as error:
      raise flags.ValidationError(f"--{holder.name}: {error}") from None
    return True

  flags.register_validator(holder, valid)


def refuse_overwriting_inputs(output_flag: str, output: Optional[str], inputs: Sequence[Optional[str]]) -> None:
  """Raises InputError, before anything is written, if the output path given to --`output_flag` is
  one of `inputs` (files or folders) or lies inside one of them: writing it would replace what
  is being read. Local paths only; links are resolved."""
  if not output or "://" in output:
    return
  target = os.path.realpath(os.path.expanduser(output))
  for source in inputs:
    if not source or "://" in source:
      continue
    real = os.path.realpath(os.path.expanduser(source))
    if target == real or target.startswith(real.rstrip(os.sep) + os.sep):
      raise errors.InputError(f"{output}: --{output_flag} would overwrite the input {source}; choose another path")


def define_record_size_flags() -> Callable[[], dict]:
  """Defines the conversion's size flags (--configs_per_chunk, --chunk_kb, --shard_mb), checked at
  parse time, for the converting programs (convert.py, convert_beam.py); returns a function giving
  their values as the converters' keyword arguments (configs_per_chunk, chunk_bytes, shard_bytes)."""
  from tpu_graphs.data import convert, records  # pylint: disable=g-import-not-at-top
  configs_per_chunk = flags.DEFINE_integer("configs_per_chunk", records.DEFAULT_CONFIGS_PER_CHUNK,
                                           "Most configs per config-chunk record.")
  chunk_kb = flags.DEFINE_integer("chunk_kb", records.DEFAULT_CHUNK_BYTES >> 10,
                                  "Most kilobytes of config features per config-chunk record.")
  shard_mb = flags.DEFINE_integer("shard_mb", convert.DEFAULT_SHARD_BYTES >> 20, "Target npz megabytes per shard.")
  require_at_least(1, configs_per_chunk, chunk_kb)
  require_at_least(0, shard_mb)
  return lambda: {"configs_per_chunk": configs_per_chunk.value, "chunk_bytes": chunk_kb.value << 10,
                  "shard_bytes": shard_mb.value << 20}


def progress_bar(start: float):
  """A progress(done, total, what) callback drawing one updating line on stderr: a bar of the steps
  done, the step, and the seconds since `start`; a step of a known count longer than ~10 s shows it."""
  def show(done: int, total: int, what: str) -> None:
    filled = round(30 * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {what:<32} "
                     f"{time.time() - start:6.1f}s")
    if done == total:
      sys.stderr.write("\n")
    sys.stderr.flush()
  return show
