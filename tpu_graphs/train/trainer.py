"""One trainer for every task: Keras fit under a distribution strategy, resumable, judged per epoch.

`run(task, build_model, config)` wires the pieces (STYLE.md, after TF-GNN's runner):

* inputs: one `inputs.TrainingInputs` of the training records (seed `config.seed + epoch`, so
  epoch e always sees the same configs in the same order), padded to static sizes by one
  `padding.Padding` when the strategy needs it;
* the task turns those into labels (b, k) and the model's scores (c,) into ranking logits;
* after each epoch: all configs of the validation graphs are scored (scoring.py), metrics land in the Keras
  logs (TensorBoard) and the history, the best model's weights are kept, early stopping counts
  epochs without improvement, and a checkpoint holds weights, optimizer, epoch and the stopping
  state, so a killed run resumes where it stopped and ends exactly as an uninterrupted one (the
  losses and models draw nothing at random outside the checkpoint or the seeded inputs); a rerun
  configured otherwise than the run's config.json is refused before anything is written; a damaged
  run directory resumes from the newest checkpoint whose tensors verify, or is refused naming the
  damaged file (config.json, history.json, checkpoints, best/); a training loss that becomes NaN
  or infinite stops the run before anything of its epoch is saved;
* a new run may start from another run's best weights (`config.init_from`: pretrain, then fine-tune);
* at the end: the best weights are evaluated on validation (per-graph breakdown in
  metrics.json), test predictions are written as CSV and the scoring model is saved.

Run directory: config.json, checkpoints/, logs/ (TensorBoard), best/ (weights), history.json,
metrics.json, predictions.csv, model/ (SavedModel of the scorer: GraphTensor -> (c,) scores) and
what the `exporters` add (export/: the serving SavedModel on plain tensors, tpu_graphs/export).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import warnings
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import errors, predictions, storage
from tpu_graphs.train import inputs, losses, padding, scoring, strategies, tasks, xla


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
  """Everything a run depends on; written to <out_dir>/config.json."""
  train_dir: str  # converted records of the training split (<records>/tile/xla/train)
  valid_dir: str
  out_dir: str
  test_dir: Optional[str] = None  # records to write predictions.csv for
  epochs: int = 10
  # Steps per epoch (an epoch ends in validation); None = one pass over every config chunk. A
  # fixed count keeps runs on a handful of graphs long enough to learn: lists are then sampled
  # from as many passes over the chunks as the epoch needs, each with fresh configs.
  steps_per_epoch: Optional[int] = None
  batch_size: int = 8  # graphs per step, over all replicas
  configs_per_graph: int = 16  # configs sampled per graph and step: the list size k
  learning_rate: float = 1e-3
  # "constant", or "cosine": linear warmup over warmup_steps, then cosine decay to 0 at the last step.
  learning_rate_schedule: str = "constant"
  warmup_steps: int = 0
  loss: str = "listmle:1,mse:0.02"
  patience: int = 5  # epochs without a better validation primary metric before stopping
  eval_batch_size: int = 8  # config chunks scored per evaluation step
  seed: int = 0
  verbose: int = 1  # Keras progress bar: 0 silent, 1 bar, 2 one line per epoch
  # The TPU path on any device: inputs padded to static sizes and an XLA-compiled step (xla.py).
  jit_compile: bool = False
  model: dict = dataclasses.field(default_factory=dict)  # the model's settings, recorded in config.json
  # The named experiment the settings were resolved from: {"name", "collection"} (train/experiments.py).
  experiment: dict = dataclasses.field(default_factory=dict)
  # Another run directory whose best weights (best/weights) initialise the model before its first
  # epoch: pretrain on one collection, fine-tune on another. Its model must have this run's variables.
  init_from: Optional[str] = None


class RunDirectoryError(errors.InputError):
  """A run directory that cannot be resumed or read: its config.json is of another run, or one of
  its files (config.json, history.json, a checkpoint, best/) is damaged."""


class TrainingDivergedError(errors.InputError):
  """The training loss became NaN or infinite: the run stops and keeps its last good checkpoint."""


def check_learning_rate(value: float) -> None:
  """Raises ValueError for a learning rate that would train to NaN, backwards or not at all."""
  if not math.isfinite(value) or value <= 0:
    raise ValueError(f"learning rate {value} is not a positive finite number")


def _start_over(run_dir) -> str:
  return f"delete {run_dir} (or pass another --out_dir) to start over"


# config.json entries a rerun may change and still resume the run: how long it trains, how it
# reports, and where its data and directory are. Any other change would resume weights, optimizer
# state and stopping state that another configuration produced.
RESUMABLE_CHANGES = frozenset({"epochs", "patience", "verbose", "train_dir", "valid_dir", "test_dir", "out_dir",
                               "experiment.data_root"})


def _read_run_json(run_dir, name: str, kind: type):
  """The content of <run_dir>/<name>, of type `kind`; None if there is none yet; RunDirectoryError
  if it is damaged (truncated, not JSON, not a `kind`)."""
  path = storage.join(run_dir, name)
  try:
    content = json.loads(storage.read_text(path))
  except FileNotFoundError:
    return None
  except (OSError, ValueError, tf.errors.OpError) as error:
    raise RunDirectoryError(f"{path}: damaged ({type(error).__name__}: {error}); {_start_over(run_dir)}") from None
  if not isinstance(content, kind):
    raise RunDirectoryError(f"{path}: damaged (holds a JSON {type(content).__name__}, not a {kind.__name__} as this "
                            f"program writes); {_start_over(run_dir)}")
  return content


def read_run_config(run_dir) -> Optional[dict]:
  """The content of <run_dir>/config.json; None if there is none yet."""
  return _read_run_json(run_dir, "config.json", dict)


def read_history(run_dir, first_epoch: int) -> list:
  """The entries of <run_dir>/history.json of the epochs before `first_epoch` (those the resumed
  checkpoint has done); every one of them must be there."""
  history = _read_run_json(run_dir, "history.json", list) or []
  path = storage.join(run_dir, "history.json")
  kept = [entry for entry in history if isinstance(entry, dict) and isinstance(entry.get("epoch"), int)
          and entry["epoch"] < first_epoch]
  if [entry["epoch"] for entry in kept] != list(range(first_epoch)):
    raise RunDirectoryError(f"{path}: damaged (epochs {[entry['epoch'] for entry in kept]} are recorded, the "
                            f"checkpoint has done {first_epoch}); {_start_over(run_dir)}")
  return kept


def _tensors_readable(prefix: str) -> Optional[str]:
  """Why the checkpoint at `prefix` cannot be restored (its index or data unreadable, a checksum
  that does not match), or None. Reading every tensor checks every checksum."""
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # load_checkpoint takes ram:// prefixes for folders
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as error:  # IndexError: data file too short
    return str(getattr(error, "message", error)).splitlines()[0]
  return None


def checkpoint_numbers(directory) -> list[int]:
  """The numbers n of the checkpoints ckpt-<n> in `directory`, ascending, from their index files
  (not from the state file, which may be damaged)."""
  return sorted(int(match.group(1)) for name in tf.io.gfile.glob(storage.join(directory, "ckpt-*.index"))
                if (match := re.fullmatch(r"ckpt-(\d+)\.index", storage.base_name(name))))


def newest_intact_checkpoint(directory) -> Optional[str]:
  """The prefix of the newest checkpoint in `directory` (ckpt-<n>) whose tensors all read back,
  else None if there is none at all; a damaged newer one is warned of and passed over (the
  manager keeps the previous one until the next is complete). Raises RunDirectoryError if there
  are checkpoints but none is intact.

  The checkpoint state file is rewritten to name what was found where it names something else or
  is damaged: TensorFlow ignores a damaged one, which would silently restart the run from its
  first epoch.
  """
  numbers = checkpoint_numbers(directory)[::-1]
  damaged = []
  for number in numbers:
    prefix = storage.join(directory, f"ckpt-{number}")
    problem = _tensors_readable(prefix)
    if problem is None:
      if damaged:
        logging.warning("%s; resuming from %s", "; ".join(damaged), prefix)
      try:
        state = tf.train.get_checkpoint_state(directory)
      except (tf.errors.OpError, ValueError):
        state = None
      if state is None or state.model_checkpoint_path != prefix:
        older = [storage.join(directory, f"ckpt-{n}") for n in sorted(numbers) if n <= number]
        tf.compat.v1.train.update_checkpoint_state(directory, prefix, all_model_checkpoint_paths=older)
      return prefix
    damaged.append(f"{prefix}: damaged ({problem})")
  if damaged:
    raise RunDirectoryError(f"{'; '.join(damaged)}; no intact checkpoint is left: "
                            f"{_start_over(storage.parent(directory))}")
  return None


def check_best_weights(run_dir, best_epoch: int) -> None:
  """Raises RunDirectoryError if the run has a best epoch whose weights (best/) are missing or damaged:
  the final model would silently be another epoch's."""
  prefix = storage.join(run_dir, "best", "weights")
  if best_epoch < 0 and not tf.io.gfile.exists(prefix + ".index"):
    return
  previous = storage.join(run_dir, ".best.old")  # where a kill between atomic_directory's renames left it
  if not tf.io.gfile.exists(prefix + ".index") and storage.is_local(previous) and tf.io.gfile.exists(previous):
    tf.io.gfile.rename(previous, storage.join(run_dir, "best"))
  problem = _tensors_readable(prefix) if tf.io.gfile.exists(prefix + ".index") else "missing"
  if problem:
    raise RunDirectoryError(f"{prefix}: damaged ({problem}); the weights of the best epoch {best_epoch} are lost: "
                            f"{_start_over(run_dir)}")


def check_initial_weights(run_dir) -> str:
  """The prefix of the best weights of the run in `run_dir`; RunDirectoryError if it has none or
  they are damaged."""
  prefix = storage.join(run_dir, "best", "weights")
  problem = _tensors_readable(prefix) if tf.io.gfile.exists(prefix + ".index") else "missing: the run has no best epoch"
  if problem:
    raise RunDirectoryError(f"{prefix}: cannot initialise from it ({problem})")
  return prefix


def initialise_from_run(scorer: tf.keras.Model, run_dir) -> None:
  """Sets every weight of `scorer` to the best weights of the run in `run_dir` (its best/weights,
  normalization statistics included); RunDirectoryError if that run has none, they are damaged, or
  they are not a model of this one's variables and shapes."""
  prefix = check_initial_weights(run_dir)
  try:
    scorer.load_weights(prefix).assert_existing_objects_matched()
  except (AssertionError, ValueError) as error:
    raise RunDirectoryError(f"{prefix}: cannot initialise from it, its model differs from this run's "
                            f"({str(error).splitlines()[0]}); pretrain and fine-tune with the same model settings") from None


def _flat(run_config: dict) -> dict:
  """{"model.units": 64, ...}: nested settings (model, task_settings) as keys of their own."""
  return {f"{key}.{inner}" if isinstance(value, dict) else key: inner_value
          for key, value in run_config.items()
          for inner, inner_value in (value.items() if isinstance(value, dict) else [(None, value)])}


def check_resumable(run_dir, run_config: dict) -> None:
  """Raises RunDirectoryError, naming each difference, if run_dir holds a run configured otherwise
  than `run_config` (beyond RESUMABLE_CHANGES). Call it before writing anything into run_dir."""
  recorded = read_run_config(run_dir)
  if recorded is None:
    return
  recorded, wanted = _flat(recorded), _flat(json.loads(json.dumps(run_config)))  # as written: tuples become lists
  # Compared as JSON text, so that a NaN recorded (by an older version) equals itself.
  changed = [f"{key} {recorded.get(key)!r} -> {wanted.get(key)!r}" for key in sorted(set(recorded) | set(wanted))
             if key not in RESUMABLE_CHANGES and json.dumps(recorded.get(key)) != json.dumps(wanted.get(key))]
  if changed:
    raise RunDirectoryError(f"{storage.join(run_dir, 'config.json')}: this run was configured otherwise "
                            f"({'; '.join(changed)}); use another run directory or delete this one")


def run_configuration(task: tasks.Task, config: TrainingConfig, strategy: tf.distribute.Strategy) -> dict:
  """What config.json records of a run: the settings, the task and how it is distributed."""
  return {**dataclasses.asdict(config), "task": type(task).__name__, "task_settings": task.settings(),
          "strategy": type(strategy).__name__, "replicas": strategy.num_replicas_in_sync}


def check_run(task: tasks.Task, config: TrainingConfig, strategy: tf.distribute.Strategy) -> dict:
  """The checks of `run` that can refuse a run, none of which reads or writes its records: a learning
  rate or loss that cannot train, a run directory configured otherwise (check_resumable), a new
  run's init_from without best weights, and a batch the replicas cannot share. Returns the run's config.json content. Callers that write before `run`
  (converting records) call it first, so that a refused run leaves nothing behind."""
  config = dataclasses.replace(config, out_dir=str(strategies.worker_directory(strategy, config.out_dir)))
  try:
    check_learning_rate(config.learning_rate)
    losses.parse_loss_spec(config.loss)
  except ValueError as error:
    raise errors.InputError(f"{config.out_dir}: {error}") from None
  run_config = run_configuration(task, config, strategy)
  check_resumable(config.out_dir, run_config)
  if config.init_from and epochs_done(config.out_dir) == 0:
    check_initial_weights(config.init_from)
  if config.batch_size % strategy.num_replicas_in_sync:
    raise errors.InputError(f"batch_size {config.batch_size} is not divisible by "
                            f"{strategy.num_replicas_in_sync} replicas")
  return run_config


def epochs_done(out_dir) -> int:
  """Epochs the run in out_dir has finished and checkpointed (a rerun resumes after them; checkpoint
  n is saved after epoch n); 0 for a new run."""
  numbers = checkpoint_numbers(storage.join(out_dir, "checkpoints"))
  return numbers[-1] if numbers else 0


BuildModel = Callable[[tfgnn.GraphTensorSpec], tf.keras.Model]
# (final scorer, task kind "tile"/"layout", run directory) -> None: writes one more exported form
# of the model into the run directory, e.g. tpu_graphs.export.saved_model.export_to_run_directory.
ModelExporter = Callable[[tf.keras.Model, tasks.Task, str], None]


class RankingModel(tf.keras.Model):
  """Wraps a scorer (GraphTensor -> (c,) scores) into what the losses see: (b, k) logits."""

  def __init__(self, scorer: tf.keras.Model, task: tasks.Task, list_size: int):
    super().__init__()
    self.scorer, self.task, self.list_size = scorer, task, list_size

  def call(self, graph):
    return self.task.ranking_logits(graph, self.scorer(graph), self.list_size)


def _write_json(path: str, content) -> None:
  storage.write_text(path, json.dumps(content, indent=1, sort_keys=True) + "\n")


def learning_rate(config: TrainingConfig, steps_per_epoch: int):
  """The optimizer's learning rate: a float, or a schedule over the run's steps."""
  if config.learning_rate_schedule == "constant":
    return config.learning_rate
  if config.learning_rate_schedule == "cosine":
    total = config.epochs * steps_per_epoch
    warmup = min(config.warmup_steps, total - 1)
    return tf.keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else config.learning_rate, decay_steps=total - warmup,
        warmup_target=config.learning_rate if warmup else None, warmup_steps=warmup)
  raise ValueError(f"unknown learning rate schedule {config.learning_rate_schedule!r}: expected constant or cosine")


class _DropMessage(logging.Filter):
  """Drops log records whose message contains `text`."""

  def __init__(self, text: str):
    super().__init__()
    self.text = text

  def filter(self, record: logging.LogRecord) -> bool:
    return self.text not in record.getMessage()


def save_scorer(scorer: tf.keras.Model, path: str) -> None:
  """`scorer.save(path)` (Keras's SavedModel format), without two notices that format gives every
  scorer and that do not apply: that "the compiled metrics have yet to be built" (Keras assumes a
  saved model was compiled; the scorer never is, RankingModel wraps it for training), and that
  loading the GraphTensorSpec of its signatures needs tensorflow_gnn imported (everything that
  loads model/ imports it)."""
  uncompiled = _DropMessage("compiled metrics have yet to be built")
  tf.get_logger().addFilter(uncompiled)
  try:
    with warnings.catch_warnings():
      warnings.filterwarnings("ignore", "Encoding a StructuredValue with type tensorflow_gnn", UserWarning)
      scorer.save(path)
  finally:
    tf.get_logger().removeFilter(uncompiled)


class EpochEnd(tf.keras.callbacks.Callback):
  """Validation, best weights, early stopping and the resumable checkpoint, after every epoch.

  Runs before TensorBoard in the callback list so the validation metrics reach its logs.
  """

  def __init__(self, task: tasks.Task, scorer: tf.keras.Model, config: TrainingConfig,
               manager: tf.train.CheckpointManager, state: dict, history: list, validation_batches: tf.data.Dataset):
    """validation_batches: scoring.evaluation_batches of config.valid_dir, built once for every epoch."""
    super().__init__()
    self.task, self.scorer, self.config, self.manager = task, scorer, config, manager
    self.validation_batches = validation_batches
    self.state, self.history = state, history
    self.out_dir = config.out_dir

  def on_epoch_end(self, epoch, logs=None):
    logs = logs if logs is not None else {}
    loss = float(logs.get("loss", 0.0))
    if not math.isfinite(loss):  # nothing of this epoch is kept: the last checkpoint stays the newest
      self.model.stop_training = True
      raise TrainingDivergedError(
          f"{self.out_dir}: the training loss became {loss} in epoch {epoch} (learning rate "
          f"{self.config.learning_rate}, loss {self.config.loss!r}); stopped, nothing of epoch {epoch} was saved "
          f"(the checkpoints keep the {int(self.state['epoch'].numpy())} epoch(s) before it). Train with a lower "
          "--learning_rate in another --out_dir")
    validation = scoring.evaluate(self.task, scoring.score_batches(self.task, self.scorer,
                                                                   self.validation_batches))["mean"]
    logs.update({f"val_{name}": value for name, value in validation.items()})
    value = validation[self.task.primary_metric]
    if value > self.state["best_value"].numpy():
      self.state["best_value"].assign(value)
      self.state["best_epoch"].assign(epoch)
      self.state["epochs_without_improvement"].assign(0)
      storage.atomic_directory(storage.join(self.out_dir, "best"),
                               lambda path: self.scorer.save_weights(storage.join(path, "weights")))
    else:
      self.state["epochs_without_improvement"].assign_add(1)
    if self.state["epochs_without_improvement"].numpy() >= self.config.patience:
      self.state["stopped"].assign(True)
      self.model.stop_training = True
    self.state["epoch"].assign(epoch + 1)
    self.history.append({"epoch": epoch, **{k: float(v) for k, v in logs.items()}})
    _write_json(storage.join(self.out_dir, "history.json"), self.history)
    self.manager.save(checkpoint_number=epoch + 1)


def run(task: tasks.Task, build_model: BuildModel, config: TrainingConfig,
        strategy: Optional[tf.distribute.Strategy] = None,
        callbacks: Sequence[tf.keras.callbacks.Callback] = (),
        exporters: Sequence[ModelExporter] = ()) -> dict:
  """Trains (or resumes) a run in config.out_dir and returns the content of its metrics.json.

  In a multi-worker cluster every worker calls this alike; each writes the whole run into its own
  directory, strategies.worker_directory (config.out_dir for the chief).

  Args:
    task: what to train and judge (e.g. tasks.TileTask()).
    build_model: graph spec of one replica's merged batch -> Keras scorer, GraphTensor -> (c,).
    config: the run's settings.
    strategy: defaults to strategies.choose_strategy() (no TPU).
    callbacks: extra Keras callbacks, run after the trainer's own.
    exporters: called with the final (best) scorer after model/ is saved.
  """
  strategy = strategy or strategies.choose_strategy()
  run_config = check_run(task, config, strategy)
  config = dataclasses.replace(config, out_dir=run_config["out_dir"])
  out_dir = config.out_dir  # a local path or a URL (gs://...): joined with storage.join
  replicas = strategy.num_replicas_in_sync
  storage.makedirs(out_dir)
  training_inputs = inputs.TrainingInputs(config.train_dir, task, config.batch_size, config.configs_per_graph,
                                          config.seed, config.steps_per_epoch)
  static_padding = None
  if xla.needs_padding(strategy, config.jit_compile):
    static_padding = padding.Padding.fitting(training_inputs.sampled_graphs(0), config.batch_size // replicas)

  tf.keras.utils.set_random_seed(config.seed)
  spec = training_inputs.graph_spec(replicas, static_padding)
  # The scorer also serves evaluation and export, on any number of graphs.
  spec = spec.relax(num_components=True, num_nodes=True, num_edges=True)
  with strategy.scope():
    scorer = build_model(spec)
    model = RankingModel(scorer, task, config.configs_per_graph)
    optimizer = tf.keras.optimizers.Adam(learning_rate(config, training_inputs.steps_per_epoch))
    model.compile(optimizer=optimizer, loss=task.loss(config.loss),
                  **xla.compile_settings(strategy, config.jit_compile, training_inputs.steps_per_epoch))
    state = {"epoch": tf.Variable(0, dtype=tf.int64), "best_value": tf.Variable(-np.inf, dtype=tf.float64),
             "best_epoch": tf.Variable(-1, dtype=tf.int64),
             "epochs_without_improvement": tf.Variable(0, dtype=tf.int64), "stopped": tf.Variable(False)}
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **state)
  resumed = newest_intact_checkpoint(storage.join(out_dir, "checkpoints"))
  manager = tf.train.CheckpointManager(checkpoint, storage.join(out_dir, "checkpoints"), max_to_keep=2)
  if resumed:
    checkpoint.restore(resumed)
  elif config.init_from:
    initialise_from_run(scorer, config.init_from)
  first_epoch = int(state["epoch"].numpy())
  history = read_history(out_dir, first_epoch)
  check_best_weights(out_dir, int(state["best_epoch"].numpy()))
  _write_json(storage.join(out_dir, "config.json"), run_config)  # once the directory proved resumable

  validation_batches = scoring.evaluation_batches(task, config.valid_dir, config.eval_batch_size)
  if first_epoch < config.epochs and not bool(state["stopped"].numpy()):
    batches = strategy.distribute_datasets_from_function(
        lambda context: training_inputs.get_dataset(first_epoch, config.epochs, context, static_padding))
    model.fit(batches, epochs=config.epochs, initial_epoch=first_epoch,
              steps_per_epoch=training_inputs.steps_per_epoch, verbose=config.verbose,
              callbacks=[EpochEnd(task, scorer, config, manager, state, history, validation_batches),
                         tf.keras.callbacks.TensorBoard(storage.join(out_dir, "logs")), *callbacks])

  if tf.io.gfile.exists(storage.join(out_dir, "best", "weights.index")):
    scorer.load_weights(storage.join(out_dir, "best", "weights"))
  result = {"task": type(task).__name__, "task_settings": task.settings(), "primary_metric": task.primary_metric,
            "best_epoch": int(state["best_epoch"].numpy()), "epochs_run": int(state["epoch"].numpy()),
            "stopped_early": bool(state["stopped"].numpy()), "history": history,
            "valid": scoring.evaluate(task, scoring.score_batches(task, scorer, validation_batches))}
  if config.test_dir:
    scored = scoring.score_records(task, scorer, config.test_dir, config.eval_batch_size)
    predictions.write_predictions(storage.join(out_dir, "predictions.csv"), scoring.ranked_predictions(task, scored))
  storage.atomic_directory(storage.join(out_dir, "model"), lambda path: save_scorer(scorer, path))
  for exporter in exporters:
    exporter(scorer, task, out_dir)
  _write_json(storage.join(out_dir, "metrics.json"), result)
  return result
