"""Fetching the public TpuGraphs release: resumable, verified download and safe extraction.

The release is one tar per collection and split (tens of gigabytes in all) on a plain HTTP
server, each holding `npz/<collection path>/<split>/*.npz`. Over such sizes connections drop, so
a download continues from the bytes already on disk (HTTP Range) and retries with backoff; a
file is trusted only once its size, and its MD5 where the server publishes one, match. Archives
are extracted member by member after every member was checked to stay inside the destination,
each extracted graph is validated by the data layer, and a marker file records a finished
archive so that a rerun fetches nothing. An archive that fails extraction or validation (corrupt
although of the right size, which is all that can be checked where no MD5 is published) is moved
aside to `<archive>.corrupt`, never kept under its final name: one kept from an earlier run is
fetched again at once, a freshly fetched one by the next run.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import http.client
import json
import math
import os
import pathlib
import posixpath
import shutil
import tarfile
import time
import urllib.error
import urllib.request
import zlib
from typing import Callable, Optional, Sequence, TextIO, TypeVar, Union

from tpu_graphs.data import errors
from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.data import storage

RELEASE_URL = "http://download.tensorflow.org/data/tpu_graphs/v0"
_CHUNK_BYTES = 1 << 20
# How long, in all, a download waits for a silent server before giving up (Downloader.wait_seconds).
DEFAULT_WAIT_SECONDS = 180.0
_VALIDATION_CHUNK_BYTES = 1 << 26
_Result = TypeVar("_Result")


class DownloadError(errors.InputError):
  """A release archive could not be fetched, verified, extracted or validated; says which."""


class UnsafeArchiveError(DownloadError):
  """An archive member would land outside the destination, or is a link or device."""


def archive_name(collection: str, split: str) -> str:
  """'npz_tile_xla_train.tar', 'npz_layout_nlp_random_test.tar': the release's file names."""
  if collection not in graphs.COLLECTIONS:
    raise ValueError(f"unknown collection {collection!r}; expected one of {', '.join(graphs.COLLECTIONS)}")
  if split not in graphs.SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {', '.join(graphs.SPLITS)}")
  return f"npz_{collection.replace(':', '_')}_{split}.tar"


@dataclasses.dataclass(frozen=True)
class RemoteArchive:
  """One archive as the server describes it: size in bytes and, if published, MD5 as hex."""

  name: str
  url: str
  size: int
  md5: Optional[str]


def published_md5(headers: http.client.HTTPMessage) -> Optional[str]:
  """The MD5 (hex) from `x-goog-hash: ...,md5=<base64>` or `Content-MD5: <base64>`, else None."""
  values = [value.strip() for header in headers.get_all("x-goog-hash") or () for value in header.split(",")]
  encoded = [value[len("md5="):] for value in values if value.startswith("md5=")]
  encoded += headers.get_all("Content-MD5") or []
  return base64.b64decode(encoded[0]).hex() if encoded else None


def format_progress(name: str, done: int, total: int, session_bytes: int, seconds: float) -> str:
  """'npz_tile_xla_train.tar  42% 1.2 GB/2.9 GB 35.0 MB/s ETA 0:00:49'.

  The rate counts only bytes fetched in this session (`session_bytes` over `seconds`), so a
  resumed download does not report the bytes it found on disk as speed.
  """
  rate = session_bytes / seconds if seconds > 0 else 0.0
  eta = "-:--:--"
  if rate > 0:
    left = int((total - done) / rate)
    eta = f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
  percent = 100 * done // total if total else 100
  return (f"{name} {percent:3d}% {statistics.format_bytes(done)}/{statistics.format_bytes(total)} "
          f"{statistics.format_bytes(rate)}/s ETA {eta}")


def extract_archive(tar_path: Union[str, os.PathLike], dest: Union[str, os.PathLike]) -> list[pathlib.Path]:
  """Extracts a tar's regular files under `dest`, keeping their paths; returns them.

  Every member is checked before anything is written: absolute names, names with '..', links
  and devices are refused with UnsafeArchiveError, so a hostile or corrupt archive cannot write
  outside `dest`. Each file is written atomically.
  """
  tar_path, dest = pathlib.Path(tar_path), pathlib.Path(dest)
  try:
    with tarfile.open(tar_path) as archive:
      members = archive.getmembers()
      for member in members:
        name = posixpath.normpath(member.name)
        if posixpath.isabs(member.name) or name == ".." or name.startswith("../") or "\\" in member.name:
          raise UnsafeArchiveError(f"{tar_path}: member {member.name!r} would land outside {dest}; refused")
        if not (member.isfile() or member.isdir()):
          raise UnsafeArchiveError(f"{tar_path}: member {member.name!r} is a link or device; refused")
      extracted = []
      for member in members:
        if not member.isfile():
          continue
        target = dest / posixpath.normpath(member.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        with storage.atomic_path(target) as temporary, archive.extractfile(member) as source, \
            open(temporary, "wb") as sink:
          shutil.copyfileobj(source, sink, _CHUNK_BYTES)
        extracted.append(target)
  except (tarfile.TarError, EOFError, zlib.error) as error:
    raise DownloadError(f"{tar_path}: not a readable tar archive ({type(error).__name__}: {error})") from None
  return extracted


def validate_graph_files(paths: Sequence[pathlib.Path], collection: str, split: str) -> None:
  """Reads every .npz among `paths` with the data layer, config features included (streamed).

  Raises:
    DownloadError: listing every invalid file and why, every file that is not where the
      collection and split belong, or saying that there was no graph at all.
  """
  files = [path for path in paths if path.suffix == ".npz"]
  if not files:
    raise DownloadError(f"no .npz files were extracted for {collection} {split}")
  problems = []
  for path in files:
    try:
      graph = npz.read_graph(path, stream_configs=True)
      for name in npz.CONFIG_FEATURE_ARRAYS:
        streamed = getattr(graph, name, None)
        if hasattr(streamed, "iter_chunks"):
          row_bytes = streamed.dtype.itemsize * max(1, math.prod(streamed.shape[1:]))
          for _ in streamed.iter_chunks(max(1, _VALIDATION_CHUNK_BYTES // row_bytes)):
            pass
      if (graph.collection, graph.split) != (collection, split):
        problems.append(f"{path}: lies in {graph.collection} {graph.split}, expected {collection} {split}")
    except graphs.GraphFileError as error:
      problems.append(str(error))
  if problems:
    shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
    raise DownloadError(f"{len(problems)} of {len(files)} files for {collection} {split} are invalid:\n  {shown}")


class Downloader:
  """Installs release archives into `dest`: fetch (resume, retry, verify), extract, validate, mark.

  Files under `dest`: `npz/...` (the extracted tree), `<archive>.part` while downloading,
  `<archive>` once verified (deleted after a successful install), `<archive>.done`, a JSON
  record of the archive and of every file it installed with its size, and `.download.lock`.

  Args:
    dest: the data root, e.g. ~/data/tpugraphs.
    base_url: where the archives are, without the file name.
    attempts: failed requests in a row, without progress, before giving up; a request that
      fetched some bytes before failing resets the count.
    backoff_seconds: the wait after the first failure; it doubles after each further one.
    timeout_seconds: how long a silent connection is waited for.
    wait_seconds: the most time, in all, spent waiting for a server that sends nothing (silent
      connections and the pauses between retries together) before giving up; bytes received
      start the count again.
    progress: where the progress bar and messages go; None for silence.

  Two downloaders into one `dest` take turns per archive (a lock file, `.download.lock`): the
  second waits, saying so, and then finds the archive installed.
  """

  def __init__(self, dest: Union[str, os.PathLike], base_url: str = RELEASE_URL, attempts: int = 5,
               backoff_seconds: float = 2.0, timeout_seconds: float = 60.0,
               wait_seconds: float = DEFAULT_WAIT_SECONDS, progress: Optional[TextIO] = None):
    if not wait_seconds > 0:
      raise ValueError(f"wait_seconds {wait_seconds} is not positive")
    self.dest = pathlib.Path(dest).expanduser()
    self.base_url = base_url.rstrip("/")
    self.attempts, self.backoff_seconds, self.timeout_seconds = attempts, backoff_seconds, timeout_seconds
    self.wait_seconds = wait_seconds
    self.progress = progress

  def marker_path(self, name: str) -> pathlib.Path:
    return self.dest / f"{name}.done"

  def is_installed(self, name: str) -> bool:
    """True if the archive's marker exists and every file it lists is still there, same size."""
    try:
      files = json.loads(self.marker_path(name).read_text())["files"]
      return bool(files) and all((self.dest / relative).stat().st_size == size for relative, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
      return False

  def describe(self, name: str) -> RemoteArchive:
    """Asks the server (HEAD) for the archive's size and published checksum."""
    url = f"{self.base_url}/{name}"

    def head(timeout: float) -> RemoteArchive:
      with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as response:
        length = response.headers.get("Content-Length")
        if length is None:
          raise DownloadError(f"{url}: the server does not report a size, so a download could not be verified")
        return RemoteArchive(name, url, int(length), published_md5(response.headers))

    return self._with_retries(url, head)

  def fetch(self, remote: RemoteArchive) -> pathlib.Path:
    """Downloads the archive to `dest/<name>`, continuing any `.part` file; returns the path.

    Raises:
      DownloadError: when the server refuses, retries run out, or the file's size or MD5 does
        not match what the server announced (the bad file is deleted).
    """
    target = self.dest / remote.name
    if self._fetched(remote):
      return target  # only verified downloads are ever renamed to this name
    self.dest.mkdir(parents=True, exist_ok=True)
    part = self.dest / f"{remote.name}.part"
    self._say(f"{remote.name}: fetching {remote.url} (giving up after {self.wait_seconds:g} s without data)\n")
    self._with_retries(remote.url, lambda timeout: self._stream(remote, part, timeout), part)
    self._verify(remote, part)
    os.replace(part, target)
    return target

  def _fetched(self, remote: RemoteArchive) -> bool:
    """True if a verified download of the archive is already on disk (fetch returns it as is)."""
    target = self.dest / remote.name
    return target.is_file() and target.stat().st_size == remote.size

  def install(self, collection: str, split: str) -> bool:
    """Fetches, extracts and validates one collection's split; False if it was already installed."""
    name = archive_name(collection, split)
    self.dest.mkdir(parents=True, exist_ok=True)
    with storage.exclusive_lock(self.dest / ".download.lock", lambda: self._say(
        f"{self.dest}: another download is writing here; waiting for it to finish\n")):
      return self._install(collection, split, name)

  def _install(self, collection: str, split: str, name: str) -> bool:
    if self.is_installed(name):
      self._say(f"{name}: already installed\n")
      return False
    remote = self.describe(name)
    while True:
      kept = self._fetched(remote)
      tar_path = self.fetch(remote)
      self._say(f"{name}: extracting and validating\n")
      try:
        files = extract_archive(tar_path, self.dest)
        validate_graph_files(files, collection, split)
        break
      except DownloadError as error:
        aside = tar_path.with_name(f"{name}.corrupt")
        os.replace(tar_path, aside)
        if not kept:
          raise type(error)(f"{name}: corrupt, moved it to {aside} (a rerun fetches it again): {error}") from None
        self._say(f"{name}: kept from an earlier run but corrupt, moved it to {aside}; fetching it again: {error}\n")
    record = {"archive": name, "url": remote.url, "size": remote.size, "md5": remote.md5,
              "files": {path.relative_to(self.dest).as_posix(): path.stat().st_size for path in files}}
    with storage.atomic_path(self.marker_path(name)) as temporary:
      temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
    tar_path.unlink()
    self._say(f"{name}: installed {len(files)} files\n")
    return True

  def _stream(self, remote: RemoteArchive, part: pathlib.Path, timeout: float) -> None:
    """Appends the rest of the archive to `part`; ConnectionError if the body ends early."""
    offset = _file_size(part)
    if offset > remote.size:
      part.unlink()
      offset = 0
    if offset == remote.size:
      return
    free = shutil.disk_usage(self.dest).free
    if free < remote.size - offset:
      raise DownloadError(f"{self.dest}: {statistics.format_bytes(free)} free, {remote.name} needs "
                          f"{statistics.format_bytes(remote.size - offset)} more")
    request = urllib.request.Request(remote.url, headers={"Range": f"bytes={offset}-"} if offset else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
      if offset and response.status != 206:
        offset = 0  # the server ignored the range and sends the whole file
      elif offset and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
        raise DownloadError(f"{remote.url}: asked for bytes from {offset}, the server sent "
                            f"{response.headers.get('Content-Range')!r}")
      with open(part, "r+b" if offset else "wb") as sink:
        sink.seek(offset)
        sink.truncate()
        done, started, shown = offset, time.monotonic(), 0.0
        while chunk := response.read(_CHUNK_BYTES):
          sink.write(chunk)
          done += len(chunk)
          now = time.monotonic()
          if now - shown >= 0.5 or done >= remote.size:
            self._say("\r" + format_progress(remote.name, done, remote.size, done - offset, now - started))
            shown = now
    self._say("\n")
    if done < remote.size:
      raise ConnectionError(f"connection closed after {done} of {remote.size} bytes")

  def _verify(self, remote: RemoteArchive, part: pathlib.Path) -> None:
    size, problem = part.stat().st_size, None
    if size != remote.size:
      problem = f"has {size} bytes, the server announced {remote.size}"
    elif remote.md5:
      digest = hashlib.md5()
      with open(part, "rb") as source:
        while chunk := source.read(_CHUNK_BYTES):
          digest.update(chunk)
      if digest.hexdigest() != remote.md5:
        problem = f"has MD5 {digest.hexdigest()}, the server published {remote.md5}"
    if problem:
      part.unlink()
      raise DownloadError(f"{part}: {problem}; deleted it, a rerun fetches it again")

  def _with_retries(self, url: str, action: Callable[[float], _Result],
                    part: Optional[pathlib.Path] = None) -> _Result:
    """Runs `action(socket timeout)`, retrying dropped connections and server errors with doubling
    waits, until wait_seconds have passed in all without a byte received."""
    failures = 0
    waiting_since = time.monotonic()
    while True:
      before = _file_size(part)
      left = self.wait_seconds - (time.monotonic() - waiting_since)
      if failures:
        self._say(f"{url}: waiting for the server (at most {left:.0f} s more)\n")
      try:
        return action(max(0.1, min(self.timeout_seconds, left)))
      except urllib.error.HTTPError as error:
        if error.code < 500:
          raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
        problem = error
      except (OSError, http.client.HTTPException) as error:
        problem = error
      if _file_size(part) > before:
        failures, waiting_since = 1, time.monotonic()
      else:
        failures += 1
      if failures >= self.attempts:
        raise DownloadError(f"{url}: gave up after {failures} failed attempts in a row; last: {problem}")
      delay = self.backoff_seconds * 2 ** (failures - 1)
      waited = time.monotonic() - waiting_since
      if waited + delay >= self.wait_seconds:
        raise DownloadError(f"{url}: gave up after waiting {waited:.0f} s for the server (--wait_seconds "
                            f"{self.wait_seconds:g}); last: {problem}")
      self._say(f"{url}: {problem}; retrying in {delay:.0f} s\n")
      time.sleep(delay)

  def _say(self, text: str) -> None:
    if self.progress is not None:
      self.progress.write(text)
      self.progress.flush()


def _file_size(path: Optional[pathlib.Path]) -> int:
  return path.stat().st_size if path is not None and path.exists() else 0
