"""What the training programs (baselines/tiles_train.py, baselines/layout_train.py) share: the
experiment they start from, the flags that override it, and the run with its summary.

Every override flag defaults to None, "the experiment's value", so a program with no flags trains
its named experiment exactly (tpu_graphs/train/experiments.py) and the run's config.json records
what was resolved. The model's flags are made from its settings class (`model_flags`), one per
field, so a new setting needs no flag written here or in the program.
"""

import dataclasses
import json
import typing
from typing import Optional

from absl import flags

from baselines import program
from tpu_graphs.data import locations, storage
from tpu_graphs.export import run_export
from tpu_graphs.train import experiments, learning_rate, losses, memory_plan, run_experiment, strategies, weight_average

EXPERIMENT = flags.DEFINE_enum("experiment", None, list(experiments.EXPERIMENTS),
                               "The named experiment to start from (tpu_graphs/train/experiments.py); default the "
                               "program's. A training or model flag left unset takes the experiment's value.")
DATA_ROOT = flags.DEFINE_string("data_root", str(locations.EMBEDDED_NPZ),
                                "A TpuGraphs npz tree holding the collection's {train,valid,test} splits.")
RECORDS_DIR = flags.DEFINE_string("records_dir", None, "Where converted records go; default <out_dir>/records.")
MEMORY_LIMIT_GB = flags.DEFINE_float(
    "memory_limit_gb", None, "Memory the run may use (GiB); a layout run whose memory plan (printed before any "
    "work) exceeds it is refused, naming flags that would fit. Default: the memory available now.")
TPU = flags.DEFINE_string("tpu", None, "TPU name or address ('local' on a TPU VM); train with TPUStrategy.")
# TrainingConfig field -> its override flag.
TRAINING_FLAGS = {
    "epochs": flags.DEFINE_integer("epochs", None, "Training epochs, each followed by validation."),
    "batch_size": flags.DEFINE_integer("batch_size", None, "Graphs (config lists) per step, over all replicas."),
    "configs_per_graph": flags.DEFINE_integer("configs_per_graph", None, "Configs sampled per graph and step: the "
                                              "list size k."),
    "learning_rate": flags.DEFINE_float("learning_rate", None, "Adam's (peak) learning rate."),
    "loss": flags.DEFINE_string("loss", None, "Weighted TF-Ranking losses: listmle, pairwise_hinge, mse, e.g. "
                                "'pairwise_hinge:1,mse:0.1'."),
    "patience": flags.DEFINE_integer("patience", None, "Epochs without a better validation primary metric before "
                                     "stopping."),
    "weight_average": flags.DEFINE_float("weight_average", None, "Momentum of the moving average of the weights "
                                         "that validation judges and best/ keeps (0: the last step's weights)."),
    "seed": flags.DEFINE_integer("seed", None, "Seed of initialization and config sampling."),
    "jit_compile": flags.DEFINE_bool("jit_compile", None, "Train as on a TPU on any device: inputs padded to static "
                                     "sizes and an XLA-compiled step (recorded in config.json)."),
    "init_from": flags.DEFINE_string("init_from", None, "A run directory whose best weights initialise a new run's "
                                     "model (pretrain on one collection, fine-tune on this one); the model settings "
                                     "must be that run's."),
}
program.require_at_least(1, *(TRAINING_FLAGS[name] for name in ("epochs", "batch_size", "configs_per_graph",
                                                                  "patience")))
program.check_flag(TRAINING_FLAGS["loss"], lambda spec: spec is None or losses.parse_loss_spec(spec))
program.check_flag(TRAINING_FLAGS["learning_rate"], lambda value: value is None or learning_rate.check(value))
program.check_flag(TRAINING_FLAGS["weight_average"], lambda value: value is None or weight_average.check(value))


# What a training program says when Ctrl-C or SIGTERM stops it (program.run).
RERUN = "rerun the same command to resume from the last finished epoch (checkpoints/)"


def given(holders: dict) -> dict:
  """{name: value} of the flags among `holders` that were set (not None)."""
  return {name: holder.value for name, holder in holders.items() if holder.value is not None}


def _define(field: dataclasses.Field, kind: type) -> flags.FlagHolder:
  """The override flag of one settings field (experiments.setting): its type from the field's."""
  name, help_text, choices = field.name, field.metadata["help"], field.metadata["choices"]
  if kind is bool:
    return flags.DEFINE_bool(name, None, help_text)
  if kind is int:
    holder = flags.DEFINE_integer(name, None, help_text)
    if field.metadata["at_least"] is not None:
      program.require_at_least(field.metadata["at_least"], holder)
    return holder
  if kind is float:
    return flags.DEFINE_float(name, None, help_text)
  if kind is tuple:
    holder = flags.DEFINE_list(name, None, help_text)
    flags.register_validator(holder, lambda names: names is None or set(names) <= set(choices),
                             f"{name.replace('_', ' ')} must be among {', '.join(choices)}")
    return holder
  if choices:
    return flags.DEFINE_enum(name, None, choices, help_text)
  return flags.DEFINE_string(name, None, help_text)


def model_flags(settings_class: type) -> dict[str, flags.FlagHolder]:
  """Defines one override flag per field of a model settings class (experiments.TileSettings,
  LayoutSettings) and returns them, field name -> flag; call it once, at import, in the program."""
  types = typing.get_type_hints(settings_class)
  holders = {}
  for field in dataclasses.fields(settings_class):
    kind = types[field.name]
    kind = typing.get_origin(kind) or kind  # tuple[str, ...] -> tuple
    if kind is typing.Union:  # Optional[int] -> int
      kind = next(arg for arg in typing.get_args(types[field.name]) if arg is not type(None))
    holders[field.name] = _define(field, kind)
  return holders


def model_overrides(settings_class: type, holders: dict[str, flags.FlagHolder]) -> dict:
  """The settings the flags of model_flags set, as the settings class holds them (-1 for
  prune_hops is None: experiments.from_flag_value)."""
  return {name: experiments.from_flag_value(settings_class, name, value) for name, value in given(holders).items()}


def train(collection: str, default_experiment: str, out_dir: Optional[str], training: Optional[dict] = None,
          model: Optional[dict] = None) -> dict:
  """Trains `collection` with --experiment (else `default_experiment`) overridden by the shared flags
  and the program's own `training` / `model` overrides (model_overrides); prints a summary and
  returns metrics.json."""
  # Before any TensorFlow op (conversion runs some): a multi-worker strategy configures the runtime.
  strategy = strategies.choose_strategy(TPU.value)
  experiment = experiments.experiment(EXPERIMENT.value or default_experiment, collection).overridden(
      training={**given(TRAINING_FLAGS), **(training or {})}, model=model)
  out_dir = storage.as_path(out_dir)  # pathlib would mangle a URL (gs://b/run -> gs:/b/run)
  planned = run_experiment.planned_memory(experiment, DATA_ROOT.value)  # made once, for the check and the model
  if planned:
    sizes, plan = planned
    print(plan.summary(), flush=True)
    memory_plan.check(sizes, plan, None if MEMORY_LIMIT_GB.value is None else MEMORY_LIMIT_GB.value * memory_plan.GIB)
  print(f"{collection}: {run_experiment.progress_line(experiment, out_dir)} -> {out_dir}", flush=True)
  result = run_experiment.train(experiment, DATA_ROOT.value, out_dir, records_dir=RECORDS_DIR.value, strategy=strategy,
                             exporters=[run_export.export_to_run_directory], planned=planned)
  print(json.dumps({"best_epoch": result["best_epoch"], "epochs_run": result["epochs_run"],
                    "valid": result["valid"]["mean"]}, indent=1))
  unmeasured = result["valid"].get("unmeasured", [])
  if unmeasured:
    print(f"{len(unmeasured)} validation graph(s) have no measured runtime (all 0) and are left out of the metrics: "
          f"{', '.join(unmeasured)}")
  print(f"run directory: {out_dir}")
  strategies.finish(strategy)
  return result
