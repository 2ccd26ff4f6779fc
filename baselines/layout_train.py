"""Trains a layout ranking model on one collection and writes a run directory (tpu_graphs/train/trainer.py).

  python baselines/layout_train.py --source xla --search default --out_dir out/layout_xla_default
  python baselines/layout_train.py --source nlp --search random --data_root <TpuGraphs>/npz --out_dir ...
  python baselines/layout_train.py --source nlp --search default --jit_compile   # padded inputs, XLA step
  bazel run //baselines:layout_train -- --source xla --search default --out_dir ...

The recipe (experiments.LAYOUT_TRAINING and LAYOUT_MODEL, chosen on config splits of real programs,
benchmarks/real_layout.py): epochs of --steps_per_epoch steps, each step --batch_size lists of
--configs_per_graph configs sampled afresh, a pairwise hinge over all pairs of a list, warmup and
cosine decay of the learning rate, the best epoch on the valid split kept.

Scale techniques, each a flag: --prune_hops (keep configurable ops and their k-hop neighbourhood;
-1 keeps every op), --dedup (merge training configs with identical features, runtimes averaged),
--normalize (standardize log-scaled op features with training statistics), --segment_size (Graph
Segment Training; 0 = off). Configs stream from records in chunks of --configs_per_chunk; the
model scores every config of the validation and test graphs, chunk by chunk.

Run directory as tiles_train.py: config.json, metrics.json (Kendall's tau, OPA, top-K slowdown per
graph; the mean tau is the Kaggle layout score), predictions.csv (every config index, best
first), model/, export/ (the serving SavedModel, pruning inside), logs/; <out_dir>/records and <out_dir>/dedup hold the converted inputs.
"""

import dataclasses
import json

from absl import flags

from tpu_graphs import programs
from tpu_graphs.data import locations
from tpu_graphs.export import saved_model
from tpu_graphs.models import gnn, layout_model
from tpu_graphs.train import experiments, losses, strategies

_SOURCE = flags.DEFINE_enum("source", "xla", ["xla", "nlp"], "Layout collection source.")
_SEARCH = flags.DEFINE_enum("search", "default", ["default", "random"], "Layout collection search.")
_DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ),
                                 "A TpuGraphs npz tree holding layout/<source>/<search>/{train,valid,test}.")
_RECORDS_DIR = flags.DEFINE_string("records_dir", None, "Where converted records go; default <out_dir>/records.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "The run directory; default out/layout_<source>_<search>.")
_RECIPE, _MODEL = experiments.LAYOUT_TRAINING, experiments.LAYOUT_MODEL
_EPOCHS = flags.DEFINE_integer("epochs", _RECIPE["epochs"], "Epochs, each --steps_per_epoch steps, then validation.")
_STEPS_PER_EPOCH = flags.DEFINE_integer(
    "steps_per_epoch", _RECIPE["steps_per_epoch"], "Steps per epoch; 0 = one pass over every config chunk. Lists are "
    "sampled afresh from as many passes over the chunks as an epoch needs, so a few programs still give enough pairs.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", _RECIPE["batch_size"], "Config lists per step, over all replicas.")
_CONFIGS_PER_GRAPH = flags.DEFINE_integer("configs_per_graph", _RECIPE["configs_per_graph"],
                                          "Configs sampled per list: the list size k.")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer("configs_per_chunk", _MODEL.configs_per_chunk,
                                          "Configs per record chunk: bounds memory of training and scoring.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", _RECIPE["learning_rate"], "Adam's peak learning rate.")
_SCHEDULE = flags.DEFINE_enum("schedule", _RECIPE["learning_rate_schedule"], ["constant", "cosine"],
                              "Learning rate: constant, or linear warmup then cosine decay to 0 at the last step.")
_WARMUP_STEPS = flags.DEFINE_integer("warmup_steps", _RECIPE["warmup_steps"], "Warmup steps of the cosine schedule.")
_LOSS = flags.DEFINE_string("loss", _RECIPE["loss"], "Weighted TF-Ranking losses over each list, e.g. "
                            "'pairwise_hinge:1' (all pairs) or 'listmle:1'.")
_BACKBONE = flags.DEFINE_enum("backbone", _MODEL.backbone, gnn.BACKBONES, "Message passing layers.")
_UNITS = flags.DEFINE_integer("units", _MODEL.units, "Hidden width.")
_LAYERS = flags.DEFINE_integer("layers", _MODEL.layers, "Message passing rounds.")
_PRUNE_HOPS = flags.DEFINE_integer(
    "prune_hops", _MODEL.prune_hops, "Keep configurable ops and their k-hop neighbourhood; -1 = no pruning. 0 keeps "
    "nlp graphs cheap: 1 hop on the 21,918-op nlp test graph keeps 2,850 ops joined by 51k edges.")
_DEDUP = flags.DEFINE_bool("dedup", _MODEL.dedup, "Merge training configs with identical features.")
_NORMALIZE = flags.DEFINE_bool("normalize", _MODEL.normalize, "Standardize log-scaled op features with training "
                               "statistics.")
_SEGMENT_SIZE = flags.DEFINE_integer("segment_size", 0, "Graph Segment Training segment size in ops; 0 = off.")
_GRAPH_NORM = flags.DEFINE_bool("graph_norm", _MODEL.graph_norm, "GraphNorm over a graph's ops after every round.")
_CROSS_CONFIG_ATTENTION = flags.DEFINE_bool(
    "cross_config_attention", _MODEL.cross_config_attention, "Attention over the configs of a list before scoring "
    "(scores then depend on the list a config is scored in).")
_CONFIG_ENCODINGS = flags.DEFINE_list(
    "config_encodings", list(_MODEL.config_encodings),
    "What the model reads of each config's layouts, any of: categories (embedded layout values, else raw numbers), "
    "costs (layout changes, minor dimension sizes, (8, 128) padding waste), copies (producer/consumer layout "
    "changes); empty = raw layout values only.")
flags.register_validator("config_encodings", lambda names: set(names) <= set(layout_model.CONFIG_ENCODINGS),
                         f"config encodings must be among {', '.join(layout_model.CONFIG_ENCODINGS)}")
_PATIENCE = flags.DEFINE_integer("patience", _RECIPE["patience"], "Epochs without a better validation tau before "
                                 "stopping.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of initialization and config sampling.")
_TPU = flags.DEFINE_string("tpu", None, "TPU name or address ('local' on a TPU VM); train with TPUStrategy.")
_JIT_COMPILE = flags.DEFINE_bool("jit_compile", False, "Train as on a TPU on any device: inputs padded to static "
                                  "sizes and an XLA-compiled step (recorded in config.json).")
programs.require_at_least(1, _EPOCHS, _BATCH_SIZE, _CONFIGS_PER_GRAPH, _CONFIGS_PER_CHUNK, _UNITS, _LAYERS, _PATIENCE)
programs.check_flag(_LOSS, losses.parse_loss_spec)


def main(argv):
  del argv
  # Before any TensorFlow op (conversion runs some): a multi-worker strategy configures the runtime.
  strategy = strategies.choose_strategy(_TPU.value)
  collection = f"layout:{_SOURCE.value}:{_SEARCH.value}"
  out_dir = _OUT_DIR.value or f"out/layout_{_SOURCE.value}_{_SEARCH.value}"
  training = {"epochs": _EPOCHS.value, "steps_per_epoch": _STEPS_PER_EPOCH.value or None,
              "batch_size": _BATCH_SIZE.value, "configs_per_graph": _CONFIGS_PER_GRAPH.value,
              "learning_rate": _LEARNING_RATE.value, "learning_rate_schedule": _SCHEDULE.value,
              "warmup_steps": _WARMUP_STEPS.value, "loss": _LOSS.value, "patience": _PATIENCE.value,
              "eval_batch_size": _RECIPE["eval_batch_size"], "seed": _SEED.value, "jit_compile": _JIT_COMPILE.value}
  model = dataclasses.replace(
      _MODEL, units=_UNITS.value, layers=_LAYERS.value, backbone=_BACKBONE.value,
      prune_hops=_PRUNE_HOPS.value if _PRUNE_HOPS.value >= 0 else None, dedup=_DEDUP.value,
      normalize=_NORMALIZE.value, segment_size=_SEGMENT_SIZE.value or None, configs_per_chunk=_CONFIGS_PER_CHUNK.value,
      graph_norm=_GRAPH_NORM.value, cross_config_attention=_CROSS_CONFIG_ATTENTION.value,
      config_encodings=tuple(_CONFIG_ENCODINGS.value))
  result = experiments.train_collection(collection, _DATA_ROOT.value, out_dir, training, model,
                                        records_dir=_RECORDS_DIR.value, strategy=strategy,
                                        exporters=[saved_model.export_to_run_directory])
  print(json.dumps({"best_epoch": result["best_epoch"], "epochs_run": result["epochs_run"],
                    "valid": result["valid"]["mean"]}, indent=1))
  print(f"run directory: {out_dir}")
  strategies.finish(strategy)


if __name__ == "__main__":
  programs.run(main)
