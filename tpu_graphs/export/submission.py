"""The Kaggle submission: one `ID,TopConfigs` CSV over the five collections, validated first.

A row's ID is `<collection>:<graph id>` (e.g. `tile:xla:0a1c...`, `layout:nlp:random:2355...`) and
TopConfigs lists config indices best first, separated by ';'. Kaggle scores tile rows on their
first five indices and layout rows as a ranking of every config, so before anything is written
each row is checked against the test files themselves: every test graph present exactly once,
layout rows a permutation of all config indices, tile rows at least five distinct valid indices
(all of them when a kernel has fewer than five configs).
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib
from typing import Iterable, Iterator, Mapping

from tpu_graphs.data import errors, npz, storage

COLLECTIONS = ("tile:xla", "layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random")
HEADER = ("ID", "TopConfigs")
TILE_TOP_K = 5


class SubmissionError(errors.InputError):
  """A prediction row or file that Kaggle would reject or misread; names the file and row."""


@dataclasses.dataclass(frozen=True)
class Prediction:
  collection: str
  graph_id: str
  ranking: tuple[int, ...]

  @property
  def row_id(self) -> str:
    return f"{self.collection}:{self.graph_id}"


def split_row_id(row_id: str) -> tuple[str, str]:
  """('layout:xla:default', 'abc') from 'layout:xla:default:abc'; SubmissionError if malformed."""
  for collection in COLLECTIONS:
    prefix = collection + ":"
    if row_id.startswith(prefix) and len(row_id) > len(prefix) and ":" not in row_id[len(prefix):]:
      return collection, row_id[len(prefix):]
  raise SubmissionError(f"ID {row_id!r} is not <collection>:<graph id> with a collection of {', '.join(COLLECTIONS)}")


def _csv_rows(path: pathlib.Path) -> Iterator[list[str]]:
  """The rows of a UTF-8 CSV file; SubmissionError naming the file if it is not one."""
  problem = errors.regular_file_problem(path)
  if problem:
    raise SubmissionError(f"{path}: {problem}")
  try:
    with open(path, newline="", encoding="utf-8") as stream:
      yield from csv.reader(stream)
  except UnicodeDecodeError as error:
    raise SubmissionError(f"{path}: not UTF-8 text (byte {error.start}: {error.reason})") from None
  except csv.Error as error:
    raise SubmissionError(f"{path}: not a readable CSV file ({error})") from None


def read_predictions(path) -> list[Prediction]:
  """Parses one prediction CSV (any subset of collections); errors name the file and row."""
  path = pathlib.Path(path)
  predictions = []
  rows = _csv_rows(path)
  header = next(rows, None)
  if header is None or tuple(header) != HEADER:
    raise SubmissionError(f"{path}: header is {header}, expected {','.join(HEADER)}")
  for line, row in enumerate(rows, start=2):
    if len(row) != 2:
      raise SubmissionError(f"{path}: row {line} has {len(row)} fields, expected 2")
    try:
      collection, graph_id = split_row_id(row[0])
      ranking = tuple(int(index) for index in row[1].split(";"))
    except ValueError as error:  # SubmissionError is one too
      raise SubmissionError(f"{path}: row {line}: {error}") from None
    predictions.append(Prediction(collection, graph_id, ranking))
  return predictions


def test_config_counts(data_root) -> dict[str, int]:
  """Row ID -> number of configs, for every test-split file of the npz tree at data_root.

  Raises SubmissionError when there is none: a submission validated against nothing is no
  submission.
  """
  counts = {}
  for path in sorted(pathlib.Path(data_root).rglob("test/*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    if graph.collection in COLLECTIONS:
      counts[f"{graph.collection}:{graph.graph_id}"] = graph.num_configs
  if not counts:
    raise SubmissionError(f"{data_root}: no test-split .npz files of {', '.join(COLLECTIONS)}; pass the npz tree "
                          "whose test files the submission must cover")
  return counts


def validate(predictions: Iterable[Prediction], config_counts: Mapping[str, int], source: str) -> None:
  """Raises SubmissionError naming the first row that Kaggle would reject or misread."""
  seen = set()
  for number, prediction in enumerate(predictions, start=1):
    where = f"{source}: row {prediction.row_id}"
    if prediction.row_id in seen:
      raise SubmissionError(f"{where}: appears more than once")
    seen.add(prediction.row_id)
    if prediction.row_id not in config_counts:
      raise SubmissionError(f"{where}: no such test graph")
    count = config_counts[prediction.row_id]
    ranking = prediction.ranking
    out_of_range = [i for i in ranking if not 0 <= i < count]
    if out_of_range:
      raise SubmissionError(f"{where}: config index {out_of_range[0]} is out of range for {count} configs")
    if len(set(ranking)) != len(ranking):
      raise SubmissionError(f"{where}: lists a config index more than once")
    if prediction.collection == "tile:xla":
      if len(ranking) < min(TILE_TOP_K, count):
        raise SubmissionError(f"{where}: lists {len(ranking)} configs, needs {min(TILE_TOP_K, count)}")
    elif len(ranking) != count:
      raise SubmissionError(f"{where}: ranks {len(ranking)} of {count} configs; a layout row ranks all")
  missing = sorted(set(config_counts) - seen)
  if missing:
    raise SubmissionError(f"{source}: {len(missing)} test graph(s) missing, first {missing[0]}")


def write_submission(path, predictions: Iterable[Prediction]) -> None:
  """Writes rows in collection order, then by graph id, atomically."""
  order = {collection: i for i, collection in enumerate(COLLECTIONS)}
  rows = sorted(predictions, key=lambda p: (order[p.collection], p.graph_id))
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  with storage.atomic_path(path) as temporary, open(temporary, "w", newline="") as stream:
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(HEADER)
    for prediction in rows:
      writer.writerow([prediction.row_id, ";".join(str(i) for i in prediction.ranking)])


def newest_prediction_files(runs_dir) -> dict[str, pathlib.Path]:
  """Collection -> the most recently written predictions.csv under runs_dir holding its rows."""
  newest: dict[str, pathlib.Path] = {}
  for path in pathlib.Path(runs_dir).rglob("predictions.csv"):
    rows = _csv_rows(path)
    next(rows, None)
    first = next(rows, None)
    rows.close()
    if not first:
      continue
    try:
      collection, _ = split_row_id(first[0])
    except SubmissionError as error:
      raise SubmissionError(f"{path}: row 2: {error}") from None
    if collection not in newest or path.stat().st_mtime > newest[collection].stat().st_mtime:
      newest[collection] = path
  return newest


def combine(prediction_files: Iterable, data_root, output) -> int:
  """Merges prediction CSVs into one submission after validating it; returns the row count."""
  prediction_files = list(prediction_files)
  if not prediction_files:
    raise SubmissionError("no prediction files: train a model per collection (or pass --predictions)")
  predictions = [p for path in prediction_files for p in read_predictions(path)]
  validate(predictions, test_config_counts(data_root), source=f"submission from {', '.join(map(str, prediction_files))}")
  write_submission(output, predictions)
  return len(predictions)
