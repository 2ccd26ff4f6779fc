"""Files on any file system TensorFlow reaches, written atomically: the one home of file writes.

Paths may be local (`out/run`) or URLs of the file systems `tf.io.gfile` serves: `gs://`, `s3://`,
`hdfs://`, and `ram://` (TensorFlow's in-memory file system, which the tests use). pathlib mangles
URLs (`gs://b/x` becomes `gs:/b/x`), so paths that may be URLs are joined with `join`.

A write never leaves a half-written file under its final name: it goes to a temporary name beside
the file (`.<name>.<random>.tmp`), then

* where the file system renames atomically (local disks, ram://, HDFS), the temporary is renamed
  onto the final name, so readers see the old file or the new one;
* where it does not (object stores: gs:// and s3:// copy on rename), the temporary's sha256 is
  recorded, it is copied onto the final name, and the copy is read back and must have the same
  sha256 (else OSError); the temporary is then deleted.

A directory (a SavedModel) is written the same way as a whole: into a temporary directory beside
it, then swapped in (`atomic_directory`).

Inputs are found and read here too (`files_below`, `glob`, `file_size`, `open_binary`, ...), local
paths and URLs alike: local paths stay pathlib.Paths (`as_path`), so their behaviour and messages
are unchanged, and URLs go to tf.io.gfile.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import glob as local_glob
import hashlib
import os
import pathlib
import posixpath
import tempfile
import uuid
import sys
from typing import Callable, Iterator, Union

from tpu_graphs.data import errors

PathLike = Union[str, os.PathLike]
# URL schemes whose file systems rename a file atomically (no scheme: the local file system).
ATOMIC_RENAME_SCHEMES = frozenset({"", "file", "ram", "hdfs", "viewfs"})


def _tensorflow():
  """TensorFlow, imported at first use: it takes seconds to import, and programs that only touch
  local files through here (stats.py, download.py) never need it."""
  import tensorflow  # pylint: disable=g-import-not-at-top
  return tensorflow


def _gfile():
  """tf.io.gfile, which serves URLs."""
  return _tensorflow().io.gfile


def url_errors() -> tuple:
  """What reading a URL may raise besides OSError: TensorFlow's OpError, once TensorFlow is loaded
  (no URL is read without it)."""
  tensorflow = sys.modules.get("tensorflow")
  return (tensorflow.errors.OpError,) if tensorflow is not None else ()


def scheme(path: PathLike) -> str:
  """"gs" of gs://bucket/x, "" of a local path."""
  text = os.fspath(path)
  return text.split("://", 1)[0] if "://" in text else ""


def is_local(path: PathLike) -> bool:
  """A plain path of this machine's file system (not a URL)."""
  return not scheme(path)


def join(path: PathLike, *parts: str) -> str:
  """`path`/`parts`..., for local paths and URLs alike."""
  return posixpath.join(os.fspath(path), *parts) if not is_local(path) else os.path.join(os.fspath(path), *parts)


def as_path(path: PathLike) -> PathLike:
  """A local path as a pathlib.Path, a URL as its string (which pathlib would mangle)."""
  return pathlib.Path(path) if is_local(path) else os.fspath(path)


def makedirs(path: PathLike) -> None:
  """Creates the folder `path` and its parents. Locally an OSError names the path that is in the
  way (a file where a folder should be), as every local write here does."""
  if is_local(path):
    pathlib.Path(path).mkdir(parents=True, exist_ok=True)
  else:
    _gfile().makedirs(os.fspath(path))


def _parent_and_name(path: str) -> tuple[str, str]:
  return posixpath.split(path) if not is_local(path) else os.path.split(path)


def parent(path: PathLike) -> str:
  """The folder holding `path`: gs://b/x of gs://b/x/y.npz."""
  return _parent_and_name(os.fspath(path))[0]


def base_name(path: PathLike) -> str:
  """y.npz of gs://b/x/y.npz or of x/y.npz."""
  return _parent_and_name(os.fspath(path))[1]


def relative_path(path: PathLike, root: PathLike) -> str:
  """`path` relative to the folder `root` above it: x/y.npz of (gs://b/x/y.npz, gs://b)."""
  if is_local(path):
    return os.path.relpath(path, root)
  return os.fspath(path)[len(os.fspath(root).rstrip("/")) + 1:]


def exists(path: PathLike) -> bool:
  return _gfile().exists(os.fspath(path))


def is_directory(path: PathLike) -> bool:
  return os.path.isdir(path) if is_local(path) else _gfile().isdir(os.fspath(path))


def file_size(path: PathLike) -> int:
  """The file's size in bytes."""
  return os.stat(path).st_size if is_local(path) else _gfile().stat(os.fspath(path)).length


def files_below(folder: PathLike, pattern: str) -> list:
  """Everything at any depth below `folder` whose name matches `pattern` (e.g. "*.npz"), sorted
  folder by folder as pathlib sorts paths: pathlib.Paths for a local folder, strings for a URL.
  Folders with a matching name are listed too, so that readers refuse them by name."""
  if is_local(folder):
    return sorted(pathlib.Path(folder).rglob(pattern))
  found = []
  for directory, folders, files in _gfile().walk(os.fspath(folder)):
    found += [join(directory, name) for name in folders + files if fnmatch.fnmatchcase(name, pattern)]
  return sorted(found, key=lambda path: path.split("/"))


def glob(pattern: str) -> list:
  """The paths matching a shell pattern (local paths or URLs), sorted."""
  return sorted(local_glob.glob(pattern) if is_local(pattern) else _gfile().glob(pattern))


def open_binary(path: PathLike):
  """The file opened for reading bytes; seekable, so zipfile can read an npz straight from a URL."""
  return open(path, "rb") if is_local(path) else _gfile().GFile(os.fspath(path), "rb")


def sha256(path: PathLike) -> str:
  """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
  digest = hashlib.sha256()
  with _gfile().GFile(os.fspath(path), "rb") as stream:
    for block in iter(lambda: stream.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def file_problem(path: PathLike):
  """Why `path` cannot be read as a file (missing, a directory; locally also a FIFO or a device), or None."""
  if is_local(path):
    return errors.regular_file_problem(path)
  if not _gfile().exists(os.fspath(path)):
    return "no such file"
  return "a directory, not a file" if _gfile().isdir(os.fspath(path)) else None


@contextlib.contextmanager
def _local_atomic_path(path: pathlib.Path):
  """The local case: mkstemp beside `path`, os.replace onto it (see atomic_path)."""
  if os.path.lexists(path) and not os.path.islink(path):
    problem = errors.regular_file_problem(path)
    if problem:
      raise FileExistsError(errno.EEXIST, f"{problem}; refusing to replace it", str(path))
  try:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
  except OSError as error:
    raise OSError(error.errno, error.strerror, str(path.parent)) from None
  os.close(handle)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(temporary, 0o666 & ~umask)  # mkstemp makes 0600; finished files get the usual mode
  try:
    yield pathlib.Path(temporary)
    os.replace(temporary, path)
  except BaseException as error:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temporary)
    if isinstance(error, OSError) and error.errno and error.filename in (None, temporary):
      raise OSError(error.errno, error.strerror, str(path)) from None
    raise


def _commit(temporary: str, path: str) -> None:
  """Puts the finished temporary file under `path`: a rename, or a verified copy (module docstring)."""
  if scheme(path) in ATOMIC_RENAME_SCHEMES:
    _gfile().rename(temporary, path, overwrite=True)
    return
  written = sha256(temporary)
  _gfile().copy(temporary, path, overwrite=True)
  if sha256(path) != written:
    raise OSError(errno.EIO, f"the copy does not have the sha256 written ({written})", path)
  _gfile().remove(temporary)


@contextlib.contextmanager
def atomic_path(path: PathLike):
  """Yields a temporary path beside `path`; puts it under `path` only if the block succeeds.

  Local paths yield a pathlib.Path (and keep the local rules: an existing `path` that is not a
  regular file, such as a directory, a FIFO or /dev/full, is refused, never replaced; OSErrors
  name `path`, not the temporary); URLs yield a string, to be written through tf.io.gfile.
  """
  if is_local(path):
    with _local_atomic_path(pathlib.Path(path)) as temporary:
      yield temporary
    return
  path = os.fspath(path)
  parent, name = _parent_and_name(path)
  if _gfile().isdir(path):
    raise FileExistsError(errno.EEXIST, "a directory; refusing to replace it", path)
  temporary = join(parent, f".{name}.{uuid.uuid4().hex}.tmp")
  try:
    yield temporary
    _commit(temporary, path)
  except BaseException:
    with contextlib.suppress(_tensorflow().errors.NotFoundError):
      _gfile().remove(temporary)
    raise


@contextlib.contextmanager
def atomic_local_temporary(path: PathLike):
  """As atomic_path, but the temporary is always a local pathlib.Path: for writers that need a
  local file (zipfile writes other bytes to a stream it cannot seek). For a URL the finished local
  file is copied to a temporary beside `path`, then committed as atomic_path commits."""
  if is_local(path):
    with atomic_path(path) as temporary:
      yield temporary
    return
  with tempfile.TemporaryDirectory() as folder:
    local = pathlib.Path(folder, base_name(path))
    yield local
    with atomic_path(path) as temporary:
      _gfile().copy(os.fspath(local), temporary, overwrite=True)


@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w"):
  """Yields a stream ("w": text, "wb": bytes) whose content becomes `path` if the block succeeds.

  Local files are written with Python's own I/O, so a failed write is an OSError that names `path`
  (a full disk, a file size limit); URLs through tf.io.gfile."""
  with atomic_path(path) as temporary:
    if is_local(path):
      with open(temporary, mode) as stream:
        yield stream
    else:
      with _gfile().GFile(os.fspath(temporary), mode) as stream:
        yield stream


def write_text(path: PathLike, text: str) -> None:
  with atomic_write(path, "w") as stream:
    stream.write(text)


def write_bytes(path: PathLike, data: bytes) -> None:
  with atomic_write(path, "wb") as stream:
    stream.write(data)


def read_text(path: PathLike) -> str:
  """The file's text; FileNotFoundError (naming `path`) if there is none, on any file system."""
  try:
    with _gfile().GFile(os.fspath(path), "r") as stream:
      return stream.read()
  except _tensorflow().errors.NotFoundError:
    raise FileNotFoundError(errno.ENOENT, "no such file", os.fspath(path)) from None


def atomic_directory(path: PathLike, write: Callable[[str], None]) -> None:
  """Has `write` fill a temporary directory beside `path`, then swaps it in for `path`.

  Local: two renames (the old directory aside, the new one in), so `path` is always whole. Other
  file systems rename directories file by file if at all, so there every file of the finished
  temporary directory is committed (renamed or copied and verified) into a fresh `path`.
  """
  path = os.fspath(path)
  parent, name = _parent_and_name(path)
  temporary, previous = join(parent, f".{name}.tmp"), join(parent, f".{name}.old")
  for stale in (temporary, previous):
    if _gfile().exists(stale):
      _gfile().rmtree(stale)
  write(temporary)
  if is_local(path):
    if os.path.exists(path):
      os.rename(path, previous)
    os.rename(temporary, path)
  else:
    if _gfile().exists(path):
      _gfile().rmtree(path)
    for directory, _, files in _gfile().walk(temporary):
      relative = posixpath.relpath(directory, temporary)
      target_directory = path if relative == "." else join(path, relative)  # ram:// keys are plain strings
      _gfile().makedirs(target_directory)
      for file in files:
        _commit(join(directory, file), join(target_directory, file))
  if _gfile().exists(previous):
    _gfile().rmtree(previous)
  if _gfile().exists(temporary):
    _gfile().rmtree(temporary)


@contextlib.contextmanager
def exclusive_lock(lock_file: pathlib.Path, on_wait: Callable[[], None]) -> Iterator[None]:
  """Holds the kernel's lock (flock) on the local `lock_file` (created) for the block; while another
  process holds it, calls `on_wait` (to say what is waited for) and waits. A killed holder never
  leaves the lock held."""
  with open(lock_file, "a") as lock:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      on_wait()
      fcntl.flock(lock, fcntl.LOCK_EX)
    yield
