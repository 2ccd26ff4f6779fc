"""Trains a layout ranking model on one collection and writes a run directory (tpu_graphs/train/trainer.py).

  python baselines/layout_train.py --source xla --search default --out_dir out/layout_xla_default
  python baselines/layout_train.py --source nlp --search random --data_root <TpuGraphs>/npz --out_dir ...
  python baselines/layout_train.py --source nlp --search default --jit_compile   # padded inputs, XLA step
  bazel run //baselines:layout_train -- --source xla --search default --out_dir ...

The run starts from the named experiment --experiment (default "layout", the recipe:
experiments.LAYOUT_TRAINING and LayoutSettings' defaults in tpu_graphs/train/experiments.py, chosen
on config splits of real programs, benchmarks/real_layout.py); every flag overrides one of its
settings. The recipe: epochs of --steps_per_epoch steps, each step --batch_size lists of
--configs_per_graph configs sampled afresh, a pairwise hinge over all pairs of a list, warmup and
cosine decay of the learning rate, the best epoch on the valid split kept.

Scale techniques, each a flag: --prune_hops (keep configurable ops and their k-hop neighbourhood;
-1 keeps every op), --dedup (merge training configs with identical features, runtimes averaged),
--normalize (standardize log-scaled op features with training statistics), --segment_size (Graph
Segment Training where a pruned graph is longer than a segment; 0 = off). Configs stream from records
in chunks of --configs_per_chunk; the model scores every config of the validation and test graphs,
chunk by chunk. Before any work the run prints its memory plan (tpu_graphs/train/memory_plan.py) and
refuses, naming flags that would fit, a plan beyond the memory available (--memory_limit_gb).

Run directory as tiles_train.py: config.json, metrics.json (Kendall's tau, OPA, top-K slowdown per
graph; the mean tau is the Kaggle layout score), predictions.csv (every config index, best
first), export/ (the serving SavedModel, pruning inside), logs/; <out_dir>/records and <out_dir>/dedup hold the converted inputs.
"""

from absl import flags

from baselines import program
from baselines import training_flags
from tpu_graphs.models import layout_model

# --help lists the shared training flags (--data_root, --epochs, --batch_size, --seed, ...) beside
# this program's own; TensorFlow's stay in --helpfull.
flags.adopt_module_key_flags(training_flags)

_SOURCE = flags.DEFINE_enum("source", "xla", ["xla", "nlp"], "Layout collection source.")
_SEARCH = flags.DEFINE_enum("search", "default", ["default", "random"], "Layout collection search.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "The run directory; default out/layout_<source>_<search>.")
_STEPS_PER_EPOCH = flags.DEFINE_integer(
    "steps_per_epoch", None, "Steps per epoch; 0 = one pass over every config chunk. Lists are sampled afresh from as "
    "many passes over the chunks as an epoch needs, so a few programs still give enough pairs.")
_SCHEDULE = flags.DEFINE_enum("schedule", None, ["constant", "cosine"],
                              "Learning rate: constant, or linear warmup then cosine decay to 0 at the last step.")
_WARMUP_STEPS = flags.DEFINE_integer("warmup_steps", None, "Warmup steps of the cosine schedule.")
_CONFIGS_PER_CHUNK = flags.DEFINE_integer("configs_per_chunk", None,
                                          "Configs per record chunk: bounds memory of training and scoring.")
_PRUNE_HOPS = flags.DEFINE_integer(
    "prune_hops", None, "Keep configurable ops and their k-hop neighbourhood; -1 = no pruning. 0 keeps nlp graphs "
    "cheap: 1 hop on the 21,918-op nlp test graph keeps 2,850 ops joined by 51k edges.")
_DEDUP = flags.DEFINE_bool("dedup", None, "Merge training configs with identical features.")
_NORMALIZE = flags.DEFINE_bool("normalize", None, "Standardize log-scaled op features with training statistics.")
_SEGMENT_SIZE = flags.DEFINE_integer(
    "segment_size", None, "Graph Segment Training (segments, one drawn per step, the rest from a score table) "
    "in segments of this many ops wherever a graph, pruned, is longer; 0 = off. Default: segments of 256 ops only "
    "where the plain model's memory plan exceeds 8 GiB (whole programs).")
_GRAPH_NORM = flags.DEFINE_bool("graph_norm", None, "GraphNorm over a graph's ops after every round.")
_GRAPH_NORM_SCALE = flags.DEFINE_bool("graph_norm_scale", None, "GraphNorm divides by the spread of op states over "
                                      "the graph, as Cai et al.'s does; --nograph_norm_scale only centres them.")
_CONTEXT_LAYERS = flags.DEFINE_integer("context_layers", None, "Rounds of config-independent message passing, "
                                       "computed once per graph.")
_CONFIG_UNITS = flags.DEFINE_integer("config_units", None, "Width of the per-config op states (default --units).")
_CONFIG_ENCODINGS = flags.DEFINE_list(
    "config_encodings", None,
    "What the model reads of each config's layouts, any of: categories (embedded layout values, else raw numbers), "
    "costs (layout changes, minor dimension sizes, (8, 128) padding waste), copies (producer/consumer layout "
    "changes); empty = raw layout values only.")
flags.register_validator("config_encodings",
                         lambda names: names is None or set(names) <= set(layout_model.CONFIG_ENCODINGS),
                         f"config encodings must be among {', '.join(layout_model.CONFIG_ENCODINGS)}")
program.require_at_least(1, _CONFIGS_PER_CHUNK, _CONFIG_UNITS)
program.require_at_least(0, _STEPS_PER_EPOCH, _WARMUP_STEPS, _SEGMENT_SIZE, _CONTEXT_LAYERS)
program.require_at_least(-1, _PRUNE_HOPS)


def main(argv):
  del argv
  training = training_flags.given({"steps_per_epoch": _STEPS_PER_EPOCH, "learning_rate_schedule": _SCHEDULE,
                                   "warmup_steps": _WARMUP_STEPS})
  if training.get("steps_per_epoch") == 0:
    training["steps_per_epoch"] = None
  model = training_flags.given({"configs_per_chunk": _CONFIGS_PER_CHUNK, "prune_hops": _PRUNE_HOPS, "dedup": _DEDUP,
                                "normalize": _NORMALIZE, "segment_size": _SEGMENT_SIZE, "graph_norm": _GRAPH_NORM,
                                "graph_norm_scale": _GRAPH_NORM_SCALE,
                                "context_layers": _CONTEXT_LAYERS, "config_units": _CONFIG_UNITS,
                                "config_encodings": _CONFIG_ENCODINGS})
  if model.get("prune_hops") == -1:
    model["prune_hops"] = None
  if "config_encodings" in model:
    model["config_encodings"] = tuple(model["config_encodings"])
  training_flags.train(f"layout:{_SOURCE.value}:{_SEARCH.value}", "layout",
                       _OUT_DIR.value or f"out/layout_{_SOURCE.value}_{_SEARCH.value}", training, model)


if __name__ == "__main__":
  program.run(main, rerun=training_flags.RERUN)
