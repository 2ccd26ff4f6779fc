"""The Kaggle submission: one `ID,TopConfigs` CSV (tpu_graphs/data/predictions.py) over the five
collections, validated first.

Kaggle scores tile rows on their first five indices and layout rows as a ranking of every config,
so before anything is written each row is checked against the test files themselves: every test
graph present exactly once, layout rows a permutation of all config indices, tile rows at least
five distinct valid indices (all of them when a kernel has fewer than five configs): as many as
the collection's task submits (`Task.submission_length`), all when it submits every config.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Iterable, Mapping, Optional

from tpu_graphs.data import graphs, npz, predictions
from tpu_graphs.train import experiments, run_experiment


# Kaggle's IDs are the release's file names: printable ASCII without spaces (what a submission
# row may end with; reading and ranking any file name is fine).
KAGGLE_GRAPH_ID = re.compile(r"[!-~]+")


class SubmissionError(predictions.PredictionFileError):
  """Prediction rows that do not make a submission of the test files (a missing, repeated or unknown
  graph, a ranking Kaggle would misread); names the file and row."""


def test_config_counts(data_root) -> dict[str, int]:
  """Row ID -> number of configs, for every test-split file of the npz tree at data_root.

  Raises SubmissionError when there is none: a submission validated against nothing is no
  submission.
  """
  counts = {}
  for path in sorted(pathlib.Path(data_root).rglob("test/*.npz")):
    graph = npz.read_graph(path, stream_configs=True)
    if not KAGGLE_GRAPH_ID.fullmatch(graph.graph_id):
      raise SubmissionError(f"{path}: graph id {graph.graph_id!r} (the file name) cannot be in a Kaggle submission, "
                            "whose IDs are the release's file names (printable ASCII, no spaces); rename the file")
    if graph.collection in graphs.COLLECTIONS:
      counts[f"{graph.collection}:{graph.graph_id}"] = graph.num_configs
  if not counts:
    raise SubmissionError(f"{data_root}: no test-split .npz files of {', '.join(graphs.COLLECTIONS)}; pass the npz "
                          "tree whose test files the submission must cover")
  return counts


def validate(rows: Iterable[predictions.Prediction], config_counts: Mapping[str, int], source: str) -> None:
  """Raises SubmissionError naming the first row that Kaggle would reject or misread."""
  seen = set()
  for prediction in rows:
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
    length = experiments.task_class(prediction.collection).submission_length
    if length is not None:
      if len(ranking) < min(length, count):
        raise SubmissionError(f"{where}: lists {len(ranking)} configs, needs {min(length, count)}")
    elif len(ranking) != count:
      raise SubmissionError(f"{where}: ranks {len(ranking)} of {count} configs; a {prediction.collection} row "
                            "ranks all")
  missing = sorted(set(config_counts) - seen)
  if missing:
    raise SubmissionError(f"{source}: {len(missing)} test graph(s) missing, first {missing[0]}")


def write_submission(path, rows: Iterable[predictions.Prediction]) -> None:
  """Writes rows in collection order, then by graph id, atomically."""
  order = {collection: i for i, collection in enumerate(graphs.COLLECTIONS)}
  predictions.write_predictions(path, sorted(rows, key=lambda p: (order[p.collection], p.graph_id)))


def runs_trained_on(runs_dir, data_root) -> tuple[list[pathlib.Path], list[str]]:
  """The predictions.csv files under runs_dir whose run trained on data_root (the config.json beside
  each records its data root, run_experiment.data_root_name), and for each other one a line naming it
  and why it is passed over: predictions of another data root's test graphs cannot make this
  root's submission, even where graph ids coincide (generated data reuses the release's names)."""
  wanted = run_experiment.data_root_name(data_root)
  taken, passed_over = [], []
  for path in sorted(pathlib.Path(runs_dir).rglob("predictions.csv")):
    try:
      recorded = run_experiment.recorded_data_root(json.loads((path.parent / "config.json").read_text()))
    except FileNotFoundError:
      passed_over.append(f"{path}: no config.json beside it records its data root")
      continue
    except (OSError, ValueError) as error:
      passed_over.append(f"{path}: its config.json is unreadable ({error})")
      continue
    if recorded == wanted:
      taken.append(path)
    else:
      passed_over.append(f"{path}: trained on {recorded or 'an unrecorded data root'}, not {wanted}")
  return taken, passed_over


def newest_prediction_files(runs_dir, candidates: Optional[Iterable[pathlib.Path]] = None) -> dict[str, pathlib.Path]:
  """Collection -> the most recently written predictions.csv holding its rows, among `candidates`
  (default: every predictions.csv under runs_dir)."""
  newest: dict[str, pathlib.Path] = {}
  for path in pathlib.Path(runs_dir).rglob("predictions.csv") if candidates is None else candidates:
    rows = predictions.csv_rows(path)
    next(rows, None)
    first = next(rows, None)
    rows.close()
    if not first:
      continue
    try:
      collection, _ = predictions.split_row_id(first[0])
    except predictions.PredictionFileError as error:
      raise SubmissionError(f"{path}: row 2: {error}") from None
    if collection not in newest or path.stat().st_mtime > newest[collection].stat().st_mtime:
      newest[collection] = path
  return newest


def combine(prediction_files: Iterable, data_root, output) -> int:
  """Merges prediction CSVs into one submission after validating it; returns the row count."""
  prediction_files = list(prediction_files)
  if not prediction_files:
    raise SubmissionError("no prediction files: train a model per collection (or pass --predictions)")
  rows = [p for path in prediction_files for p in predictions.read_predictions(path)]
  validate(rows, test_config_counts(data_root), source=f"submission from {', '.join(map(str, prediction_files))}")
  write_submission(output, rows)
  return len(rows)
