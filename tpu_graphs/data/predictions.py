"""Prediction files: `ID,TopConfigs` CSVs, as training runs write them and Kaggle reads them.

A row's ID is `<collection>:<graph id>` (e.g. `tile:xla:0a1c...`, `layout:nlp:random:2355...`) and
TopConfigs lists config indices best first, separated by ';'. Reading checks the form of every
row; whether the rows make a submission is for baselines/submission.py to judge.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
from typing import Iterable, Iterator

import numpy as np

from tpu_graphs.data import errors, graphs, storage

HEADER = ("ID", "TopConfigs")


class PredictionFileError(errors.InputError):
  """A prediction row or file that Kaggle would reject or misread; names the file and row."""


@dataclasses.dataclass(frozen=True)
class Prediction:
  collection: str
  graph_id: str
  ranking: tuple[int, ...]

  @property
  def row_id(self) -> str:
    return f"{self.collection}:{self.graph_id}"

  @classmethod
  def from_row_id(cls, row_id: str, ranking: tuple[int, ...]) -> "Prediction":
    return cls(*split_row_id(row_id), ranking)

  def positions(self, num_configs: int) -> np.ndarray:
    """(num_configs,) float64 each config's place in the ranking (0 = predicted fastest): scores a
    metric can compare with runtimes. ValueError unless the ranking lists every config once."""
    order = np.asarray(self.ranking, np.int64)
    if sorted(order.tolist()) != list(range(num_configs)):
      raise ValueError(f"{self.row_id}: does not rank all {num_configs} configs once each")
    positions = np.empty(num_configs)
    positions[order] = np.arange(num_configs)
    return positions


def split_row_id(row_id: str) -> tuple[str, str]:
  """('layout:xla:default', 'abc') from 'layout:xla:default:abc'; PredictionFileError if malformed."""
  for collection in graphs.COLLECTIONS:
    prefix = collection + ":"
    if row_id.startswith(prefix) and len(row_id) > len(prefix) and ":" not in row_id[len(prefix):]:
      return collection, row_id[len(prefix):]
  raise PredictionFileError(
      f"ID {row_id!r} is not <collection>:<graph id> with a collection of {', '.join(graphs.COLLECTIONS)}")


def csv_rows(path: pathlib.Path) -> Iterator[list[str]]:
  """The rows of a UTF-8 CSV file; PredictionFileError naming the file if it is not one."""
  problem = errors.regular_file_problem(path)
  if problem:
    raise PredictionFileError(f"{path}: {problem}")
  try:
    with open(path, newline="", encoding="utf-8") as stream:
      yield from csv.reader(stream)
  except UnicodeDecodeError as error:
    raise PredictionFileError(f"{path}: not UTF-8 text (byte {error.start}: {error.reason})") from None
  except csv.Error as error:
    raise PredictionFileError(f"{path}: not a readable CSV file ({error})") from None


def read_predictions(path) -> list[Prediction]:
  """Parses one prediction CSV (any subset of collections); errors name the file and row."""
  path = pathlib.Path(path)
  predictions = []
  rows = csv_rows(path)
  header = next(rows, None)
  if header is None or tuple(header) != HEADER:
    raise PredictionFileError(f"{path}: header is {header}, expected {','.join(HEADER)}")
  for line, row in enumerate(rows, start=2):
    if len(row) != 2:
      raise PredictionFileError(f"{path}: row {line} has {len(row)} fields, expected 2")
    try:
      collection, graph_id = split_row_id(row[0])
      ranking = tuple(int(index) for index in row[1].split(";"))
    except ValueError as error:  # PredictionFileError is one too
      raise PredictionFileError(f"{path}: row {line}: {error}") from None
    predictions.append(Prediction(collection, graph_id, ranking))
  return predictions


def write_predictions(path, predictions: Iterable[Prediction]) -> None:
  """Writes the rows in the order given, atomically."""
  storage.makedirs(os.path.dirname(os.fspath(path)) or ".")
  with storage.atomic_write(path) as stream:  # a local path or a URL (gs://...)
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(HEADER)
    for prediction in predictions:
      writer.writerow([prediction.row_id, ";".join(str(i) for i in prediction.ranking)])
