"""TpuGraphs npz files, local or at URLs: reading (whole or streamed) and deterministic, atomic writing.

A layout file can hold 100k configs x 1k configurable nodes x 18 floats, gigabytes once
decompressed, so the config-feature array can be streamed in row chunks straight out of the zip
member instead of being loaded. Writing is byte-deterministic (fixed zip timestamps, fixed member
order) so that regenerated datasets compare equal, and atomic (temp file, then rename) so an
interrupted write never leaves a half file under the final name. Paths may be URLs of any file
system tf.io.gfile serves (tpu_graphs/data/storage.py); a file for a URL is written locally first,
so it has the bytes a local write gives.
"""

from __future__ import annotations

import io
import math
import os
import pathlib
import zipfile
import zlib
from typing import Callable, Iterable, Iterator, Optional, Union

import numpy as np

from tpu_graphs.data import graphs, storage

# Arrays that scale with the number of configs and may be streamed instead of loaded.
CONFIG_FEATURE_ARRAYS = ("config_feat", "node_config_feat")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# What reading a corrupt npz file raises: bad zip structure or CRC, broken compression, short
# data, a malformed array header (a failed read from a URL: storage.url_errors()).
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError)


class StreamedArray:
  """An array inside an npz file, read in leading-axis chunks on demand.

  Holds only the header (shape, dtype); `iter_chunks` reopens the member and decompresses it
  sequentially, so memory stays at one chunk whatever the array's size.
  """

  def __init__(self, path: storage.PathLike, member: str, shape: tuple, dtype: np.dtype, fortran: bool):
    self.path, self.member = path, member
    self.shape, self.dtype = tuple(shape), np.dtype(dtype)
    if fortran and len(self.shape) > 1:
      raise graphs.GraphFileError(path, f"'{member[:-4]}' is stored in Fortran order; cannot stream it")

  @property
  def ndim(self) -> int:
    return len(self.shape)

  def iter_chunks(self, rows: int) -> Iterator[np.ndarray]:
    """Yields consecutive (<=rows, *shape[1:]) arrays covering the leading axis in order.

    Raises GraphFileError when the member turns out corrupt (bad CRC, broken compression,
    truncated) or holds values the format does not allow (graphs.check_values).
    """
    row_items = int(np.prod(self.shape[1:], dtype=np.int64))
    name = self.member[:-4]
    try:
      with storage.open_binary(self.path) as file, zipfile.ZipFile(file) as archive, \
          archive.open(self.member) as stream:
        _read_header(stream)
        for start in range(0, self.shape[0], rows):
          count = min(rows, self.shape[0] - start)
          nbytes = count * row_items * self.dtype.itemsize
          data = stream.read(nbytes)
          if len(data) != nbytes:
            raise graphs.GraphFileError(self.path, f"'{name}' is truncated at row {start}")
          chunk = np.frombuffer(data, dtype=self.dtype).reshape((count,) + self.shape[1:])
          graphs.check_values(self.path, name, chunk)
          yield chunk
        stream.read(1)  # reaching the member's end is what makes zipfile check its CRC
    except graphs.GraphFileError:
      raise
    except _UNREADABLE + storage.url_errors() as error:
      raise graphs.GraphFileError(self.path, f"'{name}' is unreadable ({type(error).__name__}: {error})") from None

  def __array__(self, dtype=None):
    whole = np.concatenate(list(self.iter_chunks(max(1, self.shape[0]))), axis=0) if self.shape[0] \
        else np.zeros(self.shape, self.dtype)
    return whole.astype(dtype) if dtype is not None else whole


def _read_header(stream):
  version = np.lib.format.read_magic(stream)
  if version == (1, 0):
    return np.lib.format.read_array_header_1_0(stream)
  return np.lib.format.read_array_header_2_0(stream)


def _checked_header(path: storage.PathLike, info: zipfile.ZipInfo, stream) -> tuple[tuple, bool, np.dtype]:
  """(shape, fortran order, dtype) of a member's array, after checking that the member holds
  exactly the bytes its header promises: a corrupt header claiming terabytes is refused before
  anything is allocated."""
  shape, fortran, dtype = _read_header(stream)
  name = info.filename[:-4]
  if dtype.hasobject:
    raise graphs.GraphFileError(path, f"'{name}' holds Python objects, not numbers")
  promised = math.prod(shape) * dtype.itemsize
  held = info.file_size - stream.tell()
  if promised != held:
    raise graphs.GraphFileError(path, f"'{name}' header promises a {'x'.join(map(str, shape)) or 'scalar'} "
                                f"{dtype} array ({promised} bytes), the file holds {held} bytes")
  return shape, fortran, dtype


def _read_member(path: storage.PathLike, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
  with archive.open(info) as stream:
    _checked_header(path, info, stream)
  with archive.open(info) as stream:
    array = np.lib.format.read_array(stream, allow_pickle=False)
    stream.read(1)  # reaching the member's end is what makes zipfile check its CRC
  return array


def read_array(path: Union[str, os.PathLike], name: str) -> np.ndarray:
  """The array `name` of one npz file, the others left on disk (e.g. a graph's runtimes before
  anything reads its features). GraphFileError naming the file where it is unreadable or has none."""
  path = storage.as_path(path)
  problem = storage.file_problem(path)
  if problem:
    raise graphs.GraphFileError(path, problem)
  try:
    with storage.open_binary(path) as file, zipfile.ZipFile(file) as archive:
      info = next((info for info in archive.infolist() if info.filename == f"{name}.npy"), None)
      if info is None:
        raise graphs.GraphFileError(path, f"missing key {name!r}")
      return _read_member(path, archive, info)
  except graphs.GraphFileError:  # a ValueError too: said as it is, not as an unreadable archive
    raise
  except _UNREADABLE + storage.url_errors() as error:
    raise graphs.GraphFileError(path, f"not a readable npz archive ({type(error).__name__}: {error})") from None


def infer_collection_and_split(path: Union[str, os.PathLike]) -> tuple[Optional[str], Optional[str]]:
  """('layout:nlp:random', 'test') from .../layout/nlp/random/test/x.npz; None where unknown."""
  parts = pathlib.Path(path).parts if storage.is_local(path) else os.fspath(path).split("/")
  split = parts[-2] if len(parts) >= 2 and parts[-2] in graphs.SPLITS else None
  return graphs.collection_of_folders(parts[:-1]), split


def read_graph(path: Union[str, os.PathLike], collection: Optional[str] = None,
               split: Optional[str] = None, stream_configs: bool = False) -> graphs.Graph:
  """Reads and validates one TpuGraphs npz file.

  Args:
    path: the file, local or a URL.
    collection: e.g. 'tile:xla' or 'layout:xla:default'; inferred from the path, then from the
      keys ('tile' or 'layout'), when not given.
    split: 'train', 'valid' or 'test'; inferred from the parent folder when not given. Runtimes
      must be non-negative in every split but 'test'.
    stream_configs: leave the config-feature array on disk as a StreamedArray.

  Raises:
    GraphFileError: naming the file and the problem, for any unreadable or invalid file.
  """
  path = storage.as_path(path)
  problem = storage.file_problem(path)
  if problem:
    raise graphs.GraphFileError(path, problem)
  inferred_collection, inferred_split = infer_collection_and_split(path)
  split = split or inferred_split
  try:
    with storage.open_binary(path) as file, zipfile.ZipFile(file) as archive:
      arrays = {}
      for info in archive.infolist():
        if not info.filename.endswith(".npy"):
          continue
        name = info.filename[:-4]
        if stream_configs and name in CONFIG_FEATURE_ARRAYS:
          with archive.open(info) as stream:
            shape, fortran, dtype = _checked_header(path, info, stream)
          arrays[name] = StreamedArray(path, info.filename, shape, dtype, fortran)
        else:
          arrays[name] = _read_member(path, archive, info)
  except graphs.GraphFileError:
    raise
  except _UNREADABLE + storage.url_errors() as error:
    raise graphs.GraphFileError(path, f"not a readable npz archive ({type(error).__name__}: {error})") from None
  collection = collection or inferred_collection
  if collection is None:
    if "config_feat" in arrays:
      collection = "tile"
    elif "node_config_feat" in arrays:
      collection = "layout"
    else:
      raise graphs.GraphFileError(
          path, "missing key 'config_feat' (tile) or 'node_config_feat' (layout); cannot tell the collection")
  return graphs.validate_graph(path, os.path.splitext(storage.base_name(path))[0], collection, split, arrays)


ChunkSource = Callable[[], Iterable[np.ndarray]]


def write_npz(path: Union[str, os.PathLike], arrays: dict[str, Union[np.ndarray, tuple]],
              compress: bool = True) -> None:
  """Writes arrays as an npz file, byte-deterministically and atomically.

  Each value is an ndarray, or a (shape, dtype, chunk_source) triple for arrays too large to hold:
  chunk_source() yields consecutive leading-axis chunks that are written as they come.
  """
  storage.makedirs(storage.parent(path))
  with storage.atomic_local_temporary(path) as temporary:
    compression = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(temporary, "w", compression=compression, allowZip64=True) as archive:
      for name, value in arrays.items():
        info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
        info.compress_type = compression
        info.external_attr = 0o644 << 16
        with archive.open(info, "w", force_zip64=True) as stream:
          if isinstance(value, np.ndarray):
            np.lib.format.write_array(stream, np.ascontiguousarray(value), allow_pickle=False)
          else:
            _write_chunked(stream, *value)


def _write_chunked(stream, shape, dtype, chunk_source: ChunkSource) -> None:
  dtype = np.dtype(dtype)
  header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
  encoded = io.BytesIO()
  try:
    np.lib.format.write_array_header_1_0(encoded, header)
  except ValueError:  # the header only fits the 2.0 format
    encoded = io.BytesIO()
    np.lib.format.write_array_header_2_0(encoded, header)
  stream.write(encoded.getvalue())
  rows = 0
  for chunk in chunk_source():
    chunk = np.ascontiguousarray(chunk, dtype=dtype)
    if chunk.shape[1:] != tuple(shape[1:]):
      raise ValueError(f"chunk of shape {chunk.shape} does not fit array of shape {tuple(shape)}")
    stream.write(chunk.tobytes())
    rows += chunk.shape[0]
  if rows != shape[0]:
    raise ValueError(f"chunks held {rows} rows, the header promised {shape[0]}")


def write_graph(path: Union[str, os.PathLike], graph: graphs.Graph) -> None:
  """Writes a validated graph in the dataset's npz format."""
  write_npz(path, graphs.graph_arrays(graph))
