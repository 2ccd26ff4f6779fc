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
from tpu_graphs.train import experiments

_SOURCE = flags.DEFINE_enum("source", "xla", ["xla", "nlp"], "Layout collection source.")
_SEARCH = flags.DEFINE_enum("search", "default", ["default", "random"], "Layout collection search.")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "The run directory; default out/layout_<source>_<search>.")
_STEPS_PER_EPOCH = flags.DEFINE_integer(
    "steps_per_epoch", None, "Steps per epoch; 0 = one pass over every config chunk. Lists are sampled afresh from as "
    "many passes over the chunks as an epoch needs, so a few programs still give enough pairs.")
_SCHEDULE = flags.DEFINE_enum("schedule", None, ["constant", "cosine"],
                              "Learning rate: constant, or linear warmup then cosine decay to 0 at the last step.")
_WARMUP_STEPS = flags.DEFINE_integer("warmup_steps", None, "Warmup steps of the cosine schedule.")
# One flag per model setting (experiments.LayoutSettings): --prune_hops, --dedup, --segment_size, ...
MODEL_FLAGS = training_flags.model_flags(experiments.LayoutSettings)
# --help lists the shared training flags (--data_root, --epochs, --batch_size, --seed, ...) and the
# model's beside this program's own; TensorFlow's stay in --helpfull. After model_flags, which
# defines the model's in training_flags.
flags.adopt_module_key_flags(training_flags)
program.require_at_least(0, _STEPS_PER_EPOCH, _WARMUP_STEPS)


def main(argv):
  del argv
  training = training_flags.given({"steps_per_epoch": _STEPS_PER_EPOCH, "learning_rate_schedule": _SCHEDULE,
                                   "warmup_steps": _WARMUP_STEPS})
  if training.get("steps_per_epoch") == 0:
    training["steps_per_epoch"] = None
  training_flags.train(f"layout:{_SOURCE.value}:{_SEARCH.value}", "layout",
                       _OUT_DIR.value or f"out/layout_{_SOURCE.value}_{_SEARCH.value}", training,
                       training_flags.model_overrides(experiments.LayoutSettings, MODEL_FLAGS))


if __name__ == "__main__":
  program.run(main, rerun=training_flags.RERUN)
