"""The main job: from an npz tree to a validated Kaggle submission, SavedModels and a report.

  python baselines/quickstart.py                                 # embedded generated data (README: its wall time)
  python baselines/quickstart.py --experiment smallest --out_dir /tmp/q  # the smallest run (also --mode smallest)
  python baselines/quickstart.py --data_root ~/data/tpugraphs/npz --out_dir out/real  # the real release: recipe
  bazel run //baselines:quickstart

For each of the five collections (side by side on CPUs, one after another with GPUs or a cluster):
convert the npz files to GraphTensor records, train the experiment (tpu_graphs/train/experiments.py;
tile and layout tasks on the shared trainer): on generated data the short "quickstart" runs tuned
to it, on the real release each collection's recipe, as tiles_train.py and layout_train.py train it; score every
validation config through the exported SavedModel, and write test predictions. Then merge the
five prediction files into one submission validated against the test files, rank one test graph
through a SavedModel, and write report.md with plots. Rerunning resumes finished work (converted
shards, trained epochs).

A rerun keeps what is current. Each collection's run records, when it is evaluated, what its
outputs came from (<run>/main_job.json): the sha256 of the code (the library's sources and
schemas, this program), of the collection's data files and of the run's weights and history, and
the sha256 of every output (predictions.csv, metrics.json, export/ but a native library
compiled into it, and the validation scores the report plots, main_job_scores.npz). A collection
whose record still matches both is not trained, evaluated or exported again; when all five match
and <out_dir>/main_job.json (the same for the submission and the report) does too, the rerun
writes nothing and prints the table again.
"""

import contextlib
import dataclasses
import hashlib
import io
import json
import multiprocessing
import os
import pathlib
import sys
import time
from concurrent import futures
from typing import Optional

import numpy as np
from absl import flags

from baselines import program
from baselines import submission
from tpu_graphs.analysis import report
from tpu_graphs.data import errors, graphs, locations, npz, storage
from tpu_graphs.export import ranker, run_export, saved_model
from tpu_graphs.train import experiments, run_experiment, scoring, strategies

_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ), "A TpuGraphs npz tree with all five collections.")
_OUT_DIR = flags.DEFINE_string("out_dir", "out/quickstart", "Where runs, submission.csv and the report go.")
_EXPERIMENT = flags.DEFINE_enum("experiment", None, ["quickstart", "smallest", "recipe"],
                                 "What every collection trains (tpu_graphs/train/experiments.py): quickstart (short "
                                 "runs tuned to generated data), recipe (each collection's training-program default, "
                                 "experiments 'tile' and 'layout', chosen on real programs) or smallest (one short "
                                 "epoch, small models). Default: quickstart on generated data (a GENERATED.md beside "
                                 "the npz tree, as the embedded data has), recipe on any other data root.")
flags.DEFINE_alias("mode", "experiment")
_PARALLEL = flags.DEFINE_integer("parallel", None,
                                 "How many collections train at the same time on this machine's CPUs, each in its own "
                                 "process; default one per core (at most 5). With GPUs or a cluster: always 1.")
program.require_at_least(1, _PARALLEL)


def is_generated(data_root: pathlib.Path) -> bool:
  """Whether the npz tree was made by the generator (baselines/generate.py writes GENERATED.md beside it)."""
  return (data_root.parent / "GENERATED.md").exists()


def chosen_experiment(choice: Optional[str], data_root: pathlib.Path) -> str:
  """The --experiment choice, or its default for this data root: the shortened runs tuned to generated
  data only on generated data, the real-data recipe on any other root (the real release)."""
  return choice or ("quickstart" if is_generated(data_root) else "recipe")


def collection_experiment(name: str, collection: str) -> experiments.Experiment:
  """The named experiment's settings for one collection; "recipe" means the collection's kind's own
  experiment ("tile" or "layout"), what tiles_train.py and layout_train.py train by default."""
  return experiments.experiment(graphs.collection_kind(collection) if name == "recipe" else name, collection)


def _say(step: int, message: str) -> None:
  print(f"[quickstart {step}/6] {message}", flush=True)


def test_labels(data_root: pathlib.Path, graph_path: pathlib.Path):
  """True runtimes of a generated test file ((c,) normalized for tile), or None for real data."""
  label_path = data_root.parent / "test_labels" / graph_path.relative_to(data_root).with_suffix(".npy")
  if not label_path.exists():
    return None
  labels = np.load(label_path)
  return labels[:, 0] / labels[:, 1] if labels.ndim == 2 else labels.astype(np.float64)


def score_split(serving: ranker.Ranker, data_root: pathlib.Path, collection: str, split: str,
                with_test_labels: bool = False) -> dict:
  """{row id: (runtimes, scores)} of every graph of a split, scored through the SavedModel."""
  scored = {}
  for path in sorted((graphs.collection_directory(data_root, collection) / split).glob("*.npz")):
    graph = npz.read_graph(path)
    runtimes = test_labels(data_root, path) if with_test_labels else graph.runtimes()
    if runtimes is not None:
      scored[f"{collection}:{graph.graph_id}"] = (runtimes, serving.score(graph))
  return scored


def summary_metrics(collection: str, scored: dict) -> dict:
  return scoring.evaluate(experiments.task_class(collection)(), scored)["mean"]


@dataclasses.dataclass
class CollectionOutcome:
  """What the main job keeps of one collection's run for the submission and the report."""
  result: report.CollectionResult
  test_summary: Optional[dict]  # metrics on the generator's hidden test labels; None for real data
  predictions: pathlib.Path


class LinePrefixer(io.TextIOBase):
  """A text stream that writes each line to `stream` behind `prefix`, so that the lines of
  collections training at the same time stay apart."""

  def __init__(self, stream, prefix: str):
    super().__init__()
    self._stream, self._prefix, self._partial = stream, prefix, ""

  def write(self, text: str) -> int:
    *lines, self._partial = (self._partial + text).split("\n")
    if lines:
      self._stream.write("".join(f"{self._prefix}{line}\n" for line in lines))
      self._stream.flush()
    return len(text)


def collection_run_dir(out_dir: pathlib.Path, collection: str) -> pathlib.Path:
  """Where the main job trains a collection: <out_dir>/runs/tile_xla, runs/layout_nlp_random, ..."""
  return out_dir / "runs" / collection.replace(":", "_")


def run_collection(experiment_name: str, collection: str, data_root: pathlib.Path, out_dir: pathlib.Path,
                   strategy=None) -> CollectionOutcome:
  """Converts, trains, exports and scores one collection under `strategy` (default: the trainer's
  choice); its lines start with the collection."""
  experiment = collection_experiment(experiment_name, collection).overridden(training={"verbose": 2})
  run_dir = collection_run_dir(out_dir, collection)
  _say(graphs.COLLECTIONS.index(collection) + 1,
       f"{collection}: {run_experiment.progress_line(experiment, run_dir)}, export -> {run_dir}")
  with contextlib.redirect_stdout(LinePrefixer(sys.stdout, f"  [{collection}] ")):
    started = time.time()
    run_experiment.train(experiment, data_root, run_dir, records_dir=out_dir / "records",
                      strategy=strategy,
                      exporters=[run_export.export_to_run_directory])
    serving = ranker.Ranker(run_dir / saved_model.EXPORT_DIR_NAME, configs_per_call=experiment.model.configs_per_chunk)
    scored = score_split(serving, data_root, collection, "valid")
    history = json.loads((run_dir / "history.json").read_text())
    result = report.CollectionResult(collection, history, scored, summary_metrics(collection, scored))
    labelled_test = score_split(serving, data_root, collection, "test", with_test_labels=True)
    print(f"valid: {json.dumps(result.summary)} ({time.time() - started:.0f} s)", flush=True)
  outcome = CollectionOutcome(result, summary_metrics(collection, labelled_test) if labelled_test else None,
                              run_dir / "predictions.csv")
  record_outcome(outcome, collection_inputs(experiment_name, collection, data_root, run_dir, code_version()), run_dir)
  return outcome


# Beside a collection's outputs (in its run directory) and the job's (in --out_dir): what they came from.
RECORD_FILE = "main_job.json"
SCORES_FILE = "main_job_scores.npz"  # a collection's validation scores, which the report plots
_SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[1]


def file_digests(root: pathlib.Path, paths) -> dict:
  """{path relative to root: sha256} of the files `paths` (a missing one: None)."""
  return {str(path.relative_to(root)): storage.sha256(path) if path.is_file() else None for path in sorted(paths)}


def files_below(folder: pathlib.Path, leave_out_folder: str = "") -> list:
  """The files anywhere below `folder` (none where it is missing), but those in a folder named `leave_out_folder`."""
  return [path for path in folder.rglob("*")
          if path.is_file() and not (leave_out_folder and leave_out_folder in path.relative_to(folder).parts)]


def code_version() -> str:
  """sha256 over the sources that decide what the job writes: the library's, its schemas and this program."""
  return _digest(file_digests(_SOURCE_ROOT, [*(_SOURCE_ROOT / "tpu_graphs").rglob("*.py"),
                                             *(_SOURCE_ROOT / "data" / "schemas").glob("*.pbtxt"),
                                             pathlib.Path(__file__).resolve()]))


def _digest(content) -> str:
  return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def collection_inputs(experiment_name: str, collection: str, data_root: pathlib.Path, run_dir: pathlib.Path,
                      code: str) -> str:
  """The digest of what a collection's evaluation and export come from: the code, the experiment, the
  collection's data files (and the generator's test labels) and the run's weights and history."""
  part = graphs.collection_directory("", collection)
  labels = data_root.parent / "test_labels" / part
  return _digest({"code": code, "experiment": experiment_name, "data_root": str(data_root),
                  "data": file_digests(data_root, files_below(data_root / part)),
                  "test_labels": file_digests(data_root.parent, files_below(labels)) if labels.is_dir() else {},
                  "run": file_digests(run_dir, [run_dir / name for name in ("config.json", "history.json",
                                                                             run_experiment.DATA_DERIVED_FILE)] +
                                      files_below(run_dir / "best"))})


def collection_outputs(run_dir: pathlib.Path) -> dict:
  """{file: sha256} of what the main job writes into a run directory after training."""
  return file_digests(run_dir, [run_dir / "predictions.csv", run_dir / "metrics.json", run_dir / SCORES_FILE,
                                *files_below(run_dir / saved_model.EXPORT_DIR_NAME, leave_out_folder="native")])


def record_outcome(outcome: "CollectionOutcome", inputs: str, run_dir: pathlib.Path) -> None:
  """Saves the validation scores and then the record of what the outcome's outputs came from."""
  ids = sorted(outcome.result.scored)
  with storage.atomic_path(run_dir / SCORES_FILE) as temporary, open(temporary, "wb") as stream:
    np.savez(stream, ids=np.array(ids), **{f"runtimes_{i}": outcome.result.scored[key][0] for i, key in enumerate(ids)},
             **{f"scores_{i}": outcome.result.scored[key][1] for i, key in enumerate(ids)})
  storage.write_text(run_dir / RECORD_FILE, json.dumps({
      "inputs": inputs, "outputs": collection_outputs(run_dir), "summary": outcome.result.summary,
      "test_summary": outcome.test_summary}, indent=1) + "\n")


def read_record(folder: pathlib.Path) -> Optional[dict]:
  """The main job's record in `folder`; None where there is none or it cannot be read (the work is then redone)."""
  try:
    record = json.loads((folder / RECORD_FILE).read_text())
  except (OSError, ValueError):
    return None
  return record if isinstance(record, dict) else None


def kept_outcome(experiment_name: str, collection: str, data_root: pathlib.Path, out_dir: pathlib.Path,
                 code: str) -> Optional[tuple["CollectionOutcome", str]]:
  """A collection's outcome and its inputs' digest, as its record saved them, where the record matches
  what the run's outputs now come from and hold; else None."""
  run_dir = collection_run_dir(out_dir, collection)
  record = read_record(run_dir)
  if record is None or not (run_dir / "history.json").is_file():
    return None
  inputs = collection_inputs(experiment_name, collection, data_root, run_dir, code)
  if record.get("inputs") != inputs or record.get("outputs") != collection_outputs(run_dir):
    return None
  with np.load(run_dir / SCORES_FILE) as saved:
    scored = {key: (saved[f"runtimes_{i}"], saved[f"scores_{i}"]) for i, key in enumerate(saved["ids"].tolist())}
  history = json.loads((run_dir / "history.json").read_text())
  result = report.CollectionResult(collection, history, scored, record["summary"])
  return CollectionOutcome(result, record["test_summary"], run_dir / "predictions.csv"), inputs


def job_inputs(experiment_name: str, data_root: pathlib.Path, collection_inputs_digests: dict) -> str:
  """The digest of what the submission and the report come from: every collection's inputs."""
  return _digest({"experiment": experiment_name, "data_root": str(data_root), "collections": collection_inputs_digests})


def job_outputs(out_dir: pathlib.Path) -> dict:
  """{file: sha256} of the submission and the report (with its plots)."""
  return file_digests(out_dir, [out_dir / "submission.csv", out_dir / "report.md", *out_dir.glob("*.png")])


def collections_at_once() -> int:
  """One at a time (in this process) under a multi-worker cluster or with GPUs, whose devices one
  process uses; else --parallel, by default one collection per CPU core."""
  if not strategies.trains_on_local_cpus():
    return 1
  return _PARALLEL.value or max(1, min(len(graphs.COLLECTIONS), os.cpu_count() or 1))


def run_collections(experiment_name: str, data_root: pathlib.Path, out_dir: pathlib.Path,
                    at_once: int, kept: dict) -> list[CollectionOutcome]:
  """run_collection for every collection but those `kept` ({collection: its kept outcome}), in
  graphs.COLLECTIONS order.

  The collections are independent, and a run spends much of its time on work that keeps one core
  busy at most (converting, building and tracing the model, saving and exporting, scoring through
  the SavedModel), so on a multi-core machine `at_once` run side by side in worker processes.
  """
  to_run = [c for c in graphs.COLLECTIONS if c not in kept]
  if at_once == 1 or not to_run:
    strategy = strategies.choose_strategy(None) if to_run else None
    ran = {c: run_collection(experiment_name, c, data_root, out_dir, strategy) for c in to_run}
    return [kept[c] if c in kept else ran[c] for c in graphs.COLLECTIONS]
  # spawn: a forked child would inherit this process's TensorFlow runtime threads in an unknown state
  with futures.ProcessPoolExecutor(min(at_once, len(to_run)), mp_context=multiprocessing.get_context("spawn")) as pool:
    try:
      with program.children_never_see_sigint():  # the workers start here: Ctrl-C is this process's to handle
        runs = {c: pool.submit(run_collection, experiment_name, c, data_root, out_dir) for c in to_run}
      return [kept[c] if c in kept else runs[c].result() for c in graphs.COLLECTIONS]
    except program.Stopped:
      # The running collections end now, not after their runs (minutes at full size); what they
      # leave is what a killed run leaves, which a rerun resumes from.
      pool.shutdown(wait=False, cancel_futures=True)
      for worker in multiprocessing.active_children():
        worker.terminate()
      for worker in multiprocessing.active_children():
        worker.join()
      raise
    except BaseException:
      pool.shutdown(cancel_futures=True)
      raise


def main(argv):
  del argv
  started = time.time()
  data_root, out_dir = pathlib.Path(_DATA_ROOT.value).resolve(), pathlib.Path(_OUT_DIR.value)
  missing = [c for c in graphs.COLLECTIONS if not (graphs.collection_directory(data_root, c) / "train").is_dir()]
  if missing:
    raise errors.InputError(f"{data_root}: lacks {', '.join(missing)}; pass --data_root=<TpuGraphs npz tree>")
  at_once = collections_at_once()  # before any TensorFlow op, as a multi-worker strategy needs
  if at_once > 1:
    print(f"[quickstart] {at_once} collections at a time, each in its own process", flush=True)
  experiment = chosen_experiment(_EXPERIMENT.value, data_root)
  print(f"[quickstart] experiment {experiment}" + (" (generated data)" if is_generated(data_root) else ""), flush=True)
  code, kept, inputs = code_version(), {}, {}
  for step, collection in enumerate(graphs.COLLECTIONS, 1):
    found = kept_outcome(experiment, collection, data_root, out_dir, code)
    if found:
      kept[collection], inputs[collection] = found
      _say(step, f"{collection}: kept (its weights, data and code are those its evaluation and export came from)")
  job_record = read_record(out_dir)
  if (len(kept) == len(graphs.COLLECTIONS) and job_record is not None
      and job_record.get("inputs") == job_inputs(experiment, data_root, inputs)
      and job_record.get("outputs") == job_outputs(out_dir)):
    print(report.metric_table([outcome.result for outcome in kept.values()]))
    print(f"\nnothing to do: every output is current (the main job's {RECORD_FILE} files; rerun with another "
          f"--out_dir to start over)\nsubmission: {out_dir / 'submission.csv'}\nreport: {out_dir / 'report.md'}\n"
          f"took {time.time() - started:.0f} s")
    return
  outcomes = run_collections(experiment, data_root, out_dir, at_once, kept)
  results = [outcome.result for outcome in outcomes]
  test_results = [(o.result.collection, o.test_summary) for o in outcomes if o.test_summary is not None]
  prediction_files = [outcome.predictions for outcome in outcomes]

  _say(6, f"submission, ranking through a SavedModel, report ({time.time() - started:.0f} s so far)")
  submission_path = out_dir / "submission.csv"
  rows = submission.combine(prediction_files, data_root, submission_path)
  example = sorted((graphs.collection_directory(data_root, "tile:xla") / "test").glob("*.npz"))[0]
  best = ranker.Ranker(out_dir / "runs" / "tile_xla" / saved_model.EXPORT_DIR_NAME).rank_file(example)[0].best(5)
  ranking_line = f"`{example.name}` through `runs/tile_xla/export`: best configs {[i for i, _ in best]}"
  preamble = [f"Data: `{data_root}`" + (" (**generated** data, see its GENERATED.md)" if is_generated(data_root) else ""),
              f"Experiment: {experiment}; wall time {time.time() - started:.0f} s.",
              f"Submission: `submission.csv`, {rows} rows, validated against the test files.",
              f"Ranking of one test kernel: {ranking_line}."]
  if test_results:
    preamble.append("\nTest split scored with the generator's hidden labels (never used for training):\n\n" +
                    report.metric_table([report.CollectionResult(c, [], {}, m) for c, m in test_results]))
  path = report.write_report(results, out_dir, preamble="\n".join(preamble))
  inputs = {c: collection_inputs(experiment, c, data_root, collection_run_dir(out_dir, c), code)
            for c in graphs.COLLECTIONS}
  storage.write_text(out_dir / RECORD_FILE, json.dumps({"inputs": job_inputs(experiment, data_root, inputs),
                                                        "outputs": job_outputs(out_dir)}, indent=1) + "\n")
  print(report.metric_table(results))
  print(f"\nsubmission: {submission_path} ({rows} rows)\nSavedModels: {out_dir / 'runs'}/*/export\n"
        f"report: {path}\ntook {time.time() - started:.0f} s")


if __name__ == "__main__":
  program.run(main, rerun="its running collections were ended; rerun the same command to resume (converted shards, "
                   "trained epochs and finished collections are kept)")
