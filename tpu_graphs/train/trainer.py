"""One trainer for every task: Keras fit under a distribution strategy, resumable, judged per epoch.

`run(task, build_model, config)` wires the pieces, after TF-GNN's runner (docs/training.md):

* inputs: one `inputs.TrainingInputs` of the training records (seed `config.seed + epoch`, so
  epoch e always sees the same configs in the same order), padded to static sizes by one
  `padding.Padding` when the strategy needs it;
* the task turns those into labels (b, k) and the model's scores (c,) into ranking logits;
* with `config.weight_average`, every step also moves a moving average of the weights
  (weight_average.py), and what follows judges and keeps the averaged weights;
* after each epoch: all configs of the validation graphs are scored (scoring.py), metrics land in the Keras
  logs (TensorBoard) and the history, the best model's weights are kept, early stopping counts
  epochs without improvement, and a checkpoint holds weights, optimizer, epoch and the stopping
  state, so a killed run resumes where it stopped and ends exactly as an uninterrupted one (the
  losses and models draw nothing at random outside the checkpoint or the seeded inputs); a rerun
  configured otherwise than the run's config.json is refused before anything is written, and a
  damaged run directory resumes from its newest intact checkpoint or is refused naming the damaged
  file (run_directory.py); a training loss that becomes NaN or infinite stops the run before
  anything of its epoch is saved;
* a new run may start from another run's best weights (`config.init_from`: pretrain, then fine-tune);
* at the end: the best weights are evaluated on validation (per-graph breakdown in
  metrics.json), test predictions are written as CSV and the scoring model is saved.

What the run directory holds, and how it is verified and resumed: run_directory.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import errors, predictions, storage
from tpu_graphs.models import config_lists
from tpu_graphs.train import (calibration, inputs, learning_rate, losses, padding, run_directory, scoring, strategies,
                             tasks, weight_average, xla)


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
  # Momentum of the moving average of the weights (weight_average.py) that validation judges and
  # best/ keeps; 0: the weights of the last step themselves.
  weight_average: float = 0.0
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


class TrainingDivergedError(errors.InputError):
  """The training loss became NaN or infinite: the run stops and keeps its last good checkpoint."""


def run_configuration(task: tasks.Task, config: TrainingConfig, strategy: tf.distribute.Strategy) -> dict:
  """What config.json records of a run: the settings, the task and how it is distributed."""
  return {**dataclasses.asdict(config), "task": type(task).__name__, "strategy": type(strategy).__name__, "replicas": strategy.num_replicas_in_sync}


def check_run(task: tasks.Task, config: TrainingConfig, strategy: tf.distribute.Strategy) -> dict:
  """The checks of `run` that can refuse a run, none of which reads or writes its records: a learning
  rate or loss that cannot train, a run directory configured otherwise (run_directory.check_resumable),
  a new run's init_from without best weights, and a batch the replicas cannot share. Returns the
  run's config.json content. Callers that write before `run` (converting records) call it first, so
  that a refused run leaves nothing behind."""
  config = dataclasses.replace(config, out_dir=str(strategies.worker_directory(strategy, config.out_dir)))
  try:
    learning_rate.check(config.learning_rate)
    weight_average.check(config.weight_average)
    losses.parse_loss_spec(config.loss)
  except ValueError as error:
    raise errors.InputError(f"{config.out_dir}: {error}") from None
  run_config = run_configuration(task, config, strategy)
  run_directory.check_resumable(config.out_dir, run_config)
  if config.init_from and run_directory.epochs_done(config.out_dir) == 0:
    run_directory.check_initial_weights(config.init_from)
  if config.batch_size % strategy.num_replicas_in_sync:
    raise errors.InputError(f"batch_size {config.batch_size} is not divisible by "
                            f"{strategy.num_replicas_in_sync} replicas")
  return run_config


BuildModel = Callable[[tfgnn.GraphTensorSpec], tf.keras.Model]
# (final scorer, task kind "tile"/"layout", run directory) -> None: writes one more exported form
# of the model into the run directory, e.g. tpu_graphs.export.run_export.export_to_run_directory.
ModelExporter = Callable[[tf.keras.Model, tasks.Task, str], None]


class RankingModel(tf.keras.Model):
  """Wraps a scorer (GraphTensor -> (c,) scores) into what the losses see: (b, k) logits.

  Its batches hold lists of at most `list_size` configs, which it tells the scorer
  (config_lists.lists_of_at_most), so that a step traced on padded shapes keeps k op states per
  op, not one per config of the batch. Its step applies embedding gradients as dense tensors: the
  tables are small, and an XLA-compiled step (TPUs, jit_compile) updates Adam's slots from sparse
  gradients of many thousand rows far more slowly than from dense ones.
  """

  def __init__(self, scorer: tf.keras.Model, task: tasks.Task, list_size: int,
               average: Optional[weight_average.WeightAverage] = None):
    super().__init__()
    self.scorer, self.task, self.list_size, self.average = scorer, task, list_size, average

  def call(self, graph, training=None):
    with config_lists.lists_of_at_most(self.list_size):
      return self.task.ranking_logits(graph, self.scorer(graph, training=training), self.list_size)

  # Traced as written, as the input pipelines are (readers.without_autograph): nothing here or below
  # branches on tensors, and autograph's rewriting of the scorer and TF-GNN was seconds of every run.
  @tf.autograph.experimental.do_not_convert
  def train_step(self, data):
    graph, labels = data
    with tf.GradientTape() as tape:
      logits = self(graph, training=True)
      loss = self.compute_loss(graph, labels, logits)
    gradients = tape.gradient(loss, self.trainable_variables)
    self.optimizer.apply_gradients([
        (tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient, variable)
        for gradient, variable in zip(gradients, self.trainable_variables)])
    if self.average is not None:
      self.average.update()
    return self.compute_metrics(graph, labels, logits, None)


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
    average = self.model.average
    with average.in_place() if average is not None else contextlib.nullcontext():
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
    run_directory.write_json(storage.join(self.out_dir, "history.json"), self.history)
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
    exporters: called with the final (best) scorer.
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

  # A run trains as in a fresh process even after others in this one. Keras's global name counters
  # name the step's ops, and a run after another one in a process summed in another order (its loss
  # differed in the 7th digit), which tests/programs/test_quickstart.py compares with a main job's worker.
  tf.keras.backend.clear_session()
  tf.keras.utils.set_random_seed(config.seed)
  spec = training_inputs.graph_spec(replicas, static_padding)
  # The scorer also serves evaluation and export, on any number of graphs.
  spec = spec.relax(num_components=True, num_nodes=True, num_edges=True)
  with strategy.scope():
    scorer = build_model(spec)
    model = RankingModel(scorer, task, config.configs_per_graph,
                         weight_average.averaging(scorer.trainable_variables, config.weight_average))
    optimizer = tf.keras.optimizers.Adam(learning_rate.schedule(
        config.learning_rate, config.learning_rate_schedule, config.warmup_steps,
        config.epochs * training_inputs.steps_per_epoch))
    model.compile(optimizer=optimizer, loss=task.loss(config.loss),
                  **xla.compile_settings(strategy, config.jit_compile, training_inputs.steps_per_epoch))
    state = {"epoch": tf.Variable(0, dtype=tf.int64), "best_value": tf.Variable(-np.inf, dtype=tf.float64),
             "best_epoch": tf.Variable(-1, dtype=tf.int64),
             "epochs_without_improvement": tf.Variable(0, dtype=tf.int64), "stopped": tf.Variable(False)}
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **state)
  resumed = run_directory.newest_intact_checkpoint(storage.join(out_dir, "checkpoints"))
  manager = tf.train.CheckpointManager(checkpoint, storage.join(out_dir, "checkpoints"), max_to_keep=2)
  if resumed:
    checkpoint.restore(resumed)
  elif config.init_from:
    run_directory.initialise_from_run(scorer, config.init_from)
  first_epoch = int(state["epoch"].numpy())
  history = run_directory.read_history(out_dir, first_epoch)
  run_directory.check_best_weights(out_dir, int(state["best_epoch"].numpy()))
  run_directory.write_json(storage.join(out_dir, "config.json"), run_config)  # once the directory proved resumable

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
  scored_valid = scoring.score_batches(task, scorer, validation_batches)
  result = {"task": type(task).__name__, "primary_metric": task.primary_metric,
            "best_epoch": int(state["best_epoch"].numpy()), "epochs_run": int(state["epoch"].numpy()),
            "stopped_early": bool(state["stopped"].numpy()), "history": history,
            "valid": scoring.evaluate(task, scored_valid)}
  # The predicted gain of the final weights, from the validation configs they were not trained on.
  run_directory.write_json(storage.join(out_dir, calibration.FILE_NAME),
                           calibration.as_json(calibration.fit(scored_valid, config.seed)))
  if config.test_dir:
    scored = scoring.score_records(task, scorer, config.test_dir, config.eval_batch_size)
    predictions.write_predictions(storage.join(out_dir, "predictions.csv"), scoring.ranked_predictions(task, scored))
  for exporter in exporters:
    exporter(scorer, task, out_dir)
  run_directory.write_json(storage.join(out_dir, "metrics.json"), result)
  return result
