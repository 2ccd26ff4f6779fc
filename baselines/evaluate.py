"""Scores every config of one split with a trained tile or layout model: metrics and/or predictions CSV.

  python baselines/evaluate.py --run_dir out/tiles --split valid
  python baselines/evaluate.py --run_dir out/tiles --data_root <TpuGraphs>/npz --split test --out_dir out/eval
  python baselines/evaluate.py --collection layout:nlp:default --run_dir out/layout_nlp_default --split valid

Reads <run_dir>/model (written by tiles_train.py or layout_train.py), converts the split's npz files to records
(into <out_dir>/records, reused when finished) and writes <out_dir>/metrics_<split>.json (splits
with runtimes: mean and per-kernel metrics) and <out_dir>/predictions_<split>.csv (`ID,TopConfigs`).
"""

import json
import pathlib

from tpu_graphs import programs  # first: it quiets TensorFlow, which must happen before TensorFlow loads
from absl import flags
import tensorflow as tf

from tpu_graphs.data import convert, errors, graphs, locations, predictions, storage
from tpu_graphs.train import experiments, scoring, trainer

_COLLECTION = flags.DEFINE_enum("collection", "tile:xla", list(graphs.COLLECTIONS), "Which collection the model ranks.")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer("configs_per_chunk", None, "Configs scored per chunk: bounds memory; "
                                          "default the run's (its config.json).")
_RUN_DIR = flags.DEFINE_string("run_dir", "out/tiles", "A run directory of tiles_train.py.")
_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ), "A TpuGraphs npz tree holding tile/xla/<split>.")
_SPLIT = flags.DEFINE_enum("split", "valid", graphs.SPLITS, "Which split to score.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Where results go; default the run directory.")
programs.require_at_least(1, _CONFIGS_PER_CHUNK)


def main(argv):
  del argv
  run_dir = pathlib.Path(_RUN_DIR.value)
  out_dir = pathlib.Path(_OUT_DIR.value) if _OUT_DIR.value else run_dir
  split_dir = graphs.collection_directory(_DATA_ROOT.value, _COLLECTION.value) / _SPLIT.value
  if not (run_dir / "model").is_dir():
    raise errors.InputError(f"{run_dir / 'model'}: not found; train with baselines/tiles_train.py or layout_train.py first")
  if not split_dir.is_dir():
    raise errors.InputError(f"{split_dir}: not found; pass --data_root=<TpuGraphs npz tree>")
  run_config = trainer.read_run_config(run_dir) or {}
  task_class = experiments.task_class(_COLLECTION.value)
  if run_config.get("task", task_class.__name__) != task_class.__name__:
    raise errors.InputError(f"{run_dir}: trained a {run_config['task']}, which cannot score {_COLLECTION.value} "
                            f"graphs; pass the --collection it was trained on")
  task = task_class(**run_config.get("task_settings", {}))  # reads the graphs as the run did (e.g. pruned)
  out_dir.mkdir(parents=True, exist_ok=True)
  configs_per_chunk = _CONFIGS_PER_CHUNK.value or run_config.get("model", {}).get("configs_per_chunk")
  convert.convert_directory(split_dir, out_dir / "records",
                            **({"configs_per_chunk": configs_per_chunk} if configs_per_chunk else {}))
  scorer = tf.keras.models.load_model(str(run_dir / "model"))
  records_dir = graphs.collection_directory(out_dir / "records", _COLLECTION.value) / _SPLIT.value
  eval_batch_size = run_config.get("eval_batch_size", trainer.TrainingConfig.eval_batch_size)
  scored = scoring.score_records(task, scorer, records_dir, batch_size=eval_batch_size)
  predictions.write_predictions(out_dir / f"predictions_{_SPLIT.value}.csv", scoring.ranked_predictions(task, scored))
  if all(runtimes.min() > 0 for runtimes, _ in scored.values()):
    result = scoring.evaluate(task, scored)
    with storage.atomic_path(out_dir / f"metrics_{_SPLIT.value}.json") as temporary:
      temporary.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result["mean"], indent=1))
  else:
    print(f"{_SPLIT.value}: no measured runtimes; predictions only")
  print(f"wrote {out_dir}")


if __name__ == "__main__":
  programs.run(main)
