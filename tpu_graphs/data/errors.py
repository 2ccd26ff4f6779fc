"""The base of every failure a user can fix (a bad input file, flag, path, run directory or
download), and the check every reader of input files makes first.

Each stage raises its own specific error (GraphFileError, SubmissionError, DownloadError, ...)
whose message names the file and the problem; all derive from InputError, so a program's edge
(baselines/program.py) can report any of them as one line without importing the stage that
raised it. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import stat
from typing import Optional, Union


class InputError(ValueError):
  """Input a user can fix; the message names the file (or flag) and what is wrong with it."""


def regular_file_problem(path: Union[str, os.PathLike]) -> Optional[str]:
  """Why `path` cannot be read as an input file (missing, a directory, a FIFO, a device), or None.

  Opening a FIFO for reading blocks until something writes to it, so readers check first instead
  of hanging.
  """
  try:
    mode = os.stat(path).st_mode
  except FileNotFoundError:
    return "a dangling symbolic link" if os.path.islink(path) else "no such file"
  except OSError as error:
    return error.strerror or str(error)
  if stat.S_ISREG(mode):
    return None
  if stat.S_ISDIR(mode):
    return "a directory, not a file"
  if stat.S_ISFIFO(mode):
    return "a FIFO (named pipe), not a regular file"
  return "a device or socket, not a regular file"
