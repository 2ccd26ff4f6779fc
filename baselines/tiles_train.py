"""Trains a tile:xla ranking model and writes a run directory (see tpu_graphs/train/trainer.py).

  python baselines/tiles_train.py --out_dir out/tiles --epochs 10
  python baselines/tiles_train.py --data_root <TpuGraphs>/npz --out_dir out/tiles_real --tpu local
  python baselines/tiles_train.py --jit_compile --epochs 1   # the TPU path (padding, XLA) on this machine
  bazel run //baselines:tiles_train -- --out_dir ...
  TF_CONFIG='{"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker", "index": 0}}' \
    python baselines/tiles_train.py --out_dir out/tiles   # on host0; "index": 1 on host1

The npz tree under --data_root is converted to records first (into --records_dir, default
<out_dir>/records; finished shards are reused). Rerunning with the same --out_dir resumes a killed
run from its last epoch. The run directory gets config.json, metrics.json (validation metrics,
per kernel), predictions.csv (test split, `ID,TopConfigs`), model/, export/ (the serving SavedModel)
and TensorBoard logs/. With
TF_CONFIG naming several workers, every worker runs this same command (MultiWorkerMirroredStrategy)
and non-chief workers write their copy under <out_dir>/workers/<index>/.
"""

import json

from absl import flags

from tpu_graphs import programs
from tpu_graphs.data import locations
from tpu_graphs.export import saved_model
from tpu_graphs.models import gnn, tile_model
from tpu_graphs.train import experiments, losses, strategies

_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ), "A TpuGraphs npz tree holding tile/xla/{train,valid,test}.")
_RECORDS_DIR = flags.DEFINE_string("records_dir", None, "Where converted records go; default <out_dir>/records.")
_OUT_DIR = flags.DEFINE_string("out_dir", "out/tiles", "The run directory.")
_EPOCHS = flags.DEFINE_integer("epochs", 10, "Training epochs (each sees every graph chunk once).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "Graphs per step, over all replicas.")
_CONFIGS_PER_GRAPH = flags.DEFINE_integer("configs_per_graph", 16, "Configs sampled per graph and step.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")
_LOSS = flags.DEFINE_string("loss", "listmle:1,mse:0.02",
                            "Weighted TF-Ranking losses: listmle, pairwise_hinge, mse, e.g. 'pairwise_hinge:1,mse:0.1'.")
_JOIN = flags.DEFINE_enum("join", "late", tile_model.JOINS, "Where config features meet the graph.")
_BACKBONE = flags.DEFINE_enum("backbone", "sage", gnn.BACKBONES, "Message passing layers.")
_UNITS = flags.DEFINE_integer("units", 64, "Hidden width.")
_LAYERS = flags.DEFINE_integer("layers", 3, "Message passing rounds.")
_PATIENCE = flags.DEFINE_integer("patience", 5, "Epochs without a better validation tile score before stopping.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of initialization and config sampling.")
_TPU = flags.DEFINE_string("tpu", None, "TPU name or address ('local' on a TPU VM); train with TPUStrategy.")
_JIT_COMPILE = flags.DEFINE_bool("jit_compile", False, "Train as on a TPU on any device: inputs padded to static "
                                  "sizes and an XLA-compiled step (recorded in config.json).")
programs.require_at_least(1, _EPOCHS, _BATCH_SIZE, _CONFIGS_PER_GRAPH, _UNITS, _LAYERS, _PATIENCE)
programs.check_flag(_LOSS, losses.parse_loss_spec)


def main(argv):
  del argv
  # Before any TensorFlow op (conversion runs some): a multi-worker strategy configures the runtime.
  strategy = strategies.choose_strategy(_TPU.value)
  out_dir = _OUT_DIR.value  # a local path or a URL (gs://...)
  training = {"epochs": _EPOCHS.value, "batch_size": _BATCH_SIZE.value, "configs_per_graph": _CONFIGS_PER_GRAPH.value,
              "learning_rate": _LEARNING_RATE.value, "loss": _LOSS.value, "patience": _PATIENCE.value,
              "seed": _SEED.value, "jit_compile": _JIT_COMPILE.value}
  model = experiments.ModelSettings(units=_UNITS.value, layers=_LAYERS.value, backbone=_BACKBONE.value,
                                    join=_JOIN.value)
  result = experiments.train_collection("tile:xla", _DATA_ROOT.value, out_dir, training, model,
                                        records_dir=_RECORDS_DIR.value, strategy=strategy,
                                        exporters=[saved_model.export_to_run_directory])
  print(json.dumps({"best_epoch": result["best_epoch"], "epochs_run": result["epochs_run"],
                    "valid": result["valid"]["mean"]}, indent=1))
  print(f"run directory: {out_dir}")
  strategies.finish(strategy)


if __name__ == "__main__":
  programs.run(main)
