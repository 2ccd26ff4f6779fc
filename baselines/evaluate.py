"""Scores every config of one split with a trained tile or layout model: metrics and/or predictions CSV.

  python baselines/evaluate.py --run_dir out/tiles --split valid
  python baselines/evaluate.py --run_dir out/layout_nlp_default --split test --out_dir out/eval
  python baselines/evaluate.py --run_dir out/tiles --data_root <another npz tree> --split valid

Rebuilds the model of <run_dir> (a run of tiles_train.py, layout_train.py or quickstart.py) from
its config.json with its best weights, as exporting a run does (saved_model.best_scorer), and reads
what config.json records: its collection, the data root it trained on (--data_root overrides) and how
it read its graphs. Converts the split's npz files to records
(into <out_dir>/records, reused when finished) and writes <out_dir>/metrics_<split>.json (splits
with runtimes: mean and per-kernel metrics) and <out_dir>/predictions_<split>.csv (`ID,TopConfigs`).
"""

import json
import pathlib

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads
from absl import flags

from tpu_graphs.data import convert, errors, graphs, locations, npz, predictions, storage
from tpu_graphs.export import saved_model
from tpu_graphs.train import experiments, run_directory, run_experiment, scoring, trainer

_COLLECTION = flags.DEFINE_enum("collection", None, list(graphs.COLLECTIONS),
                                "Which collection the model ranks; default the run's (its config.json).")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer("configs_per_chunk", None, "Configs scored per chunk: bounds memory; "
                                          "default the run's (its config.json).")
_RUN_DIR = flags.DEFINE_string("run_dir", "out/tiles", "A run directory of tiles_train.py, layout_train.py or "
                               "quickstart.py (<out_dir>/runs/<collection>).")
_DATA_ROOT = flags.DEFINE_string("data_root", None, "A TpuGraphs npz tree holding the collection's <split>; default "
                                 "the one the run trained on (its config.json), else the embedded generated data.")
_SPLIT = flags.DEFINE_enum("split", "valid", graphs.SPLITS, "Which split to score.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Where results go; default the run directory.")
program.require_at_least(1, _CONFIGS_PER_CHUNK)


def _refuse_unmeasured(split_dir: pathlib.Path) -> None:
  """Raises InputError, before anything is written, where no graph of a labelled split has a
  measured runtime: there would be no metric to compute."""
  files = sorted(split_dir.glob("*.npz"))
  if files and not any((npz.read_array(path, "config_runtime") > 0).any() for path in files):
    raise errors.InputError(f"{split_dir}: no graph of the {split_dir.name} split has a measured runtime (every "
                            "config_runtime is 0), so there is nothing to evaluate against; for predictions only, "
                            "put the files in a test/ folder and pass --split test")


def main(argv):
  del argv
  run_dir = pathlib.Path(_RUN_DIR.value)
  out_dir = pathlib.Path(_OUT_DIR.value) if _OUT_DIR.value else run_dir
  run_config = run_directory.finished_run_config(run_dir)
  # The experiment the run records, which rebuilding its model needs: a run without it is refused
  # here, before anything is converted.
  recorded, _ = run_experiment.run_model_builder(run_dir, run_config)
  collection = _COLLECTION.value or recorded.collection
  data_root = _DATA_ROOT.value or run_experiment.recorded_data_root(run_config) or str(locations.EMBEDDED_NPZ)
  split_dir = graphs.collection_directory(data_root, collection) / _SPLIT.value
  if not split_dir.is_dir():
    raise errors.InputError(f"{split_dir}: not found; pass --data_root=<TpuGraphs npz tree>")
  task_class = experiments.task_class(collection)
  if run_config.get("task", task_class.__name__) != task_class.__name__:
    raise errors.InputError(f"{run_dir}: trained a {run_config['task']}, which cannot score {collection} "
                            f"graphs; pass the --collection it was trained on")
  labelled = _SPLIT.value != "test"
  if labelled:
    _refuse_unmeasured(split_dir)
  print(f"{run_dir}: {collection}, {_SPLIT.value} split of {data_root}", flush=True)
  task = recorded.task()  # reads the graphs as the run did (e.g. pruned)
  out_dir.mkdir(parents=True, exist_ok=True)
  configs_per_chunk = _CONFIGS_PER_CHUNK.value or run_config.get("model", {}).get("configs_per_chunk")
  convert.convert_directory(split_dir, out_dir / "records",
                            **({"configs_per_chunk": configs_per_chunk} if configs_per_chunk else {}))
  _, scorer = saved_model.best_scorer(run_dir)
  records_dir = graphs.collection_directory(out_dir / "records", collection) / _SPLIT.value
  eval_batch_size = run_config.get("eval_batch_size", trainer.TrainingConfig.eval_batch_size)
  scored = scoring.score_records(task, scorer, records_dir, batch_size=eval_batch_size)
  predictions.write_predictions(out_dir / f"predictions_{_SPLIT.value}.csv", scoring.ranked_predictions(task, scored))
  if labelled or all(runtimes.min() > 0 for runtimes, _ in scored.values()):
    result = scoring.evaluate(task, scored)
    with storage.atomic_path(out_dir / f"metrics_{_SPLIT.value}.json") as temporary:
      temporary.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result["mean"], indent=1))
    if result["unmeasured"]:
      print(f"{len(result['unmeasured'])} graph(s) have no measured runtime (all 0) and are left out of the metrics: "
            f"{', '.join(result['unmeasured'])}")
  else:
    print(f"{_SPLIT.value}: no measured runtimes; predictions only")
  print(f"wrote {out_dir}")


if __name__ == "__main__":
  program.run(main)
