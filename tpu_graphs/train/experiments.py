"""Experiments as data: named settings per collection, and the one place a collection is mapped to
its task, model, preparation and evaluation batch size.

An experiment (big_vision's habit) is a name, a collection, the trainer's settings and the model's
settings of the collection's kind (`TileModel` or `LayoutModel`): `baselines/tiles_train.py`,
`baselines/layout_train.py` and `baselines/quickstart.py` resolve one by name (`--experiment`),
override what their flags say, and hand it to `train`, which converts the collection's npz files
to records (reusing finished shards), applies the layout techniques that work on data (duplicate
configs, feature statistics), builds the model and runs `trainer.run`. The run's config.json
records the resolved experiment.

Nothing else in tpu_graphs, baselines/ or benchmarks/ looks at a collection's name to choose
what to do: the kind's settings class owns its task, model builder and preparation, and each
experiment's training settings own the evaluation batch size.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from tpu_graphs.data import config_dedup, convert, errors, graphs, npz, records, storage
from tpu_graphs.models import layout_model, layout_preprocessing, tile_model
from tpu_graphs.train import memory_plan, strategies, tasks, trainer


def _convert_splits(split_dirs: Sequence[storage.PathLike], records_root, configs_per_chunk: int) -> None:
  for split_dir in split_dirs:
    convert.convert_directory(split_dir, records_root, configs_per_chunk=configs_per_chunk, progress=False)


@dataclasses.dataclass(frozen=True)
class TileModel:
  """tile:xla's model (models/tile_model.py) and how its records are cut."""
  units: int = 64
  layers: int = 3
  backbone: str = "sage"
  join: str = "late"  # where config features meet the graph
  configs_per_chunk: int = records.DEFAULT_CONFIGS_PER_CHUNK

  def task(self) -> tasks.TileTask:
    return tasks.TileTask()

  def prepare_records(self, collection: str, split_dirs: Sequence[storage.PathLike], records_root, work_dir) -> None:
    """Converts the collection's splits (npz directories, train first) to records under records_root."""
    del collection, work_dir  # nothing to prepare beside the records
    _convert_splits(split_dirs, records_root, self.configs_per_chunk)

  def model_builder(self, train_npz_dir) -> trainer.BuildModel:
    """graph spec -> Keras scorer."""
    del train_npz_dir  # the tile model needs no training statistics
    return lambda spec: tile_model.build_tile_model(spec, self.join, self.backbone, self.units, self.layers)


@dataclasses.dataclass(frozen=True)
class LayoutModel:
  """A layout model (models/layout_model.py) and the scale techniques. The defaults are the layout
  recipe's, chosen on config splits of real programs (benchmarks/real_layout.py)."""
  units: int = 64
  layers: int = 3
  backbone: str = "residual_gcn"
  prune_hops: Optional[int] = 0  # keep configurable ops and their k-hop neighbourhood; None keeps all
  dedup: bool = True  # merge training configs with identical features
  normalize: bool = True  # standardize log-scaled op features with training statistics
  # Graph Segment Training (layout_model.SegmentedScorer), a memory technique. None (the recipe):
  # segments of AUTO_SEGMENT_SIZE ops only where the plain model's memory plan exceeds
  # SEGMENT_ABOVE_BYTES, i.e. whole programs (unet3d whole: 20 GiB plain, 2.9 GiB in segments;
  # benchmarks/full_graph.py), while pruned graphs keep the plain model the real-data figures
  # measured (whole graphs ranked worse there). N > 0: segments of N ops wherever a graph is
  # longer. 0: off.
  segment_size: Optional[int] = None
  # GraphNorm after every round of message passing. It removes each config's mean op state: on real
  # programs that helped (3 config splits each: unet3d 0.832 vs 0.795, unet_3d.4x4.bf16 0.398 vs
  # 0.374, unet3d -> unet_3d.4x4.bf16 0.220 vs 0.203; benchmarks/real_layout.py), on unseen generated
  # programs it hurt (QUICKSTART_LAYOUT_MODEL). Real measurements decide the recipe.
  graph_norm: bool = True
  # GraphNorm divides by the spread of op states over the graph, as Cai et al.'s does. Centring only
  # (False) ranked unseen configs of one real program about as well (unet3d 0.817 vs 0.832,
  # unet_3d.4x4.bf16 0.407 vs 0.398) and the unseen program worse (0.150 vs 0.220; 3 splits each,
  # benchmarks/real_layout.py), so the recipe scales.
  graph_norm_scale: bool = True
  cross_config_attention: bool = False  # attention over the configs of a list
  config_encodings: tuple[str, ...] = layout_model.CONFIG_ENCODINGS  # what the encoder reads of layouts
  configs_per_chunk: int = 256

  def task(self) -> tasks.LayoutTask:
    return tasks.LayoutTask(self.prune_hops)

  def prepare_records(self, collection: str, split_dirs: Sequence[storage.PathLike], records_root, work_dir) -> None:
    """Converts the collection's splits (npz directories, train first) to records under records_root,
    the train split deduplicated into <work_dir>/dedup first if asked."""
    split_dirs = list(split_dirs)
    if self.dedup:
      deduplicated = storage.join(graphs.collection_directory(storage.join(work_dir, "dedup"), collection), "train")
      config_dedup.deduplicate_directory(split_dirs[0], deduplicated)
      split_dirs[0] = deduplicated
    _convert_splits(split_dirs, records_root, self.configs_per_chunk)

  def model_builder(self, train_npz_dir, segment_size: Optional[int] = None) -> trainer.BuildModel:
    """graph spec -> Keras scorer, with the training split's op feature statistics if normalizing,
    in segments of `segment_size` ops if given (`segment_length` decides it for a run)."""
    statistics = None
    if self.normalize:
      statistics = layout_preprocessing.op_feature_statistics(
          npz.read_graph(path, stream_configs=True).node_feat
          for path in storage.glob(storage.join(train_npz_dir, "*.npz")))
    return lambda spec: layout_model.build_layout_model(
        spec, self.backbone, self.units, self.layers, feature_statistics=statistics,
        segment_size=segment_size, graph_norm=self.graph_norm, graph_norm_scale=self.graph_norm_scale,
        cross_config_attention=self.cross_config_attention, config_encodings=self.config_encodings)


ModelSettings = Union[TileModel, LayoutModel]
# A collection's kind ('tile', 'layout') -> its task.
TASKS = {"tile": tasks.TileTask, "layout": tasks.LayoutTask}


def task_class(collection: str) -> type[tasks.Task]:
  """The Task subclass that ranks the collection's graphs."""
  return TASKS[graphs.collection_kind(collection)]


# TrainingConfig fields other than directories, per kind.
TILE_TRAINING = {"epochs": 10, "batch_size": 8, "configs_per_graph": 16, "learning_rate": 1e-3,
                 "loss": "listmle:1,mse:0.02", "patience": 5, "eval_batch_size": 8}
# The layout recipe: fixed-length epochs sampling 128-config lists afresh, all-pairs hinge, warmup +
# cosine decay; a layout chunk already holds every op of the graph, so chunks are scored one at a time.
# Lists of 128 rather than 64 configs (4x the pairs per list) lifted unet_3d.4x4.bf16, whose runtimes
# spread by 1.6%, from 0.392 to 0.411 and kept unet3d at 0.82 (benchmarks/real_layout.py, 3 splits each).
LAYOUT_TRAINING = {"epochs": 10, "steps_per_epoch": 50, "batch_size": 4, "configs_per_graph": 128,
                   "learning_rate": 1e-3, "learning_rate_schedule": "cosine", "warmup_steps": 100,
                   "loss": "pairwise_hinge:1", "patience": 10, "eval_batch_size": 1}

# The main job's layout runs leave GraphNorm out. They rank the embedded generated data, whose valid
# and test programs are other architectures than its train programs; there GraphNorm cost valid tau
# 0.521 / 0.671 / 0.381 / 0.399 -> 0.298 / 0.308 / 0.105 / 0.049 (benchmarks/generated_layout.py,
# generator version 4). The recipe keeps it: real files decide that, and they favour it
# (LayoutModel.graph_norm).
QUICKSTART_LAYOUT_MODEL = LayoutModel(graph_norm=False)

# name -> kind or collection -> (training settings, model settings); a collection's own entry wins
# over its kind's. "tile" and "layout" are the training programs' defaults; "quickstart" fits all five
# collections in a few minutes (the layout recipe shortened to 4 epochs of 64-config lists, without
# GraphNorm); "smallest" is the one-minute run the end-to-end tests use.
EXPERIMENTS: dict[str, dict[str, tuple[dict, ModelSettings]]] = {
    "tile": {"tile": (TILE_TRAINING, TileModel())},
    "layout": {"layout": (LAYOUT_TRAINING, LayoutModel())},
    "quickstart": {"tile": (dict(TILE_TRAINING, epochs=20, patience=8), TileModel()),
                   "layout": (dict(LAYOUT_TRAINING, epochs=4, warmup_steps=20, configs_per_graph=64),
                              QUICKSTART_LAYOUT_MODEL)},
    "smallest": {"tile": (dict(TILE_TRAINING, epochs=1, batch_size=4, configs_per_graph=8, patience=1),
                          TileModel(units=16, layers=1)),
                 "layout": (dict(LAYOUT_TRAINING, epochs=1, steps_per_epoch=4, configs_per_graph=8, warmup_steps=0,
                                 patience=1),
                            LayoutModel(units=16, layers=1, dedup=False, normalize=False, configs_per_chunk=250))},
}


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One collection's training run, resolved: what `train` needs besides paths."""
  name: str
  collection: str
  training: dict  # TrainingConfig fields other than directories and the experiment record
  model: ModelSettings

  def task(self) -> tasks.Task:
    return self.model.task()

  def overridden(self, training: Optional[dict] = None, model: Optional[dict] = None) -> "Experiment":
    """This experiment with some training and model settings replaced (e.g. from flags)."""
    return dataclasses.replace(self, training={**self.training, **(training or {})},
                               model=dataclasses.replace(self.model, **(model or {})))


def experiment(name: str, collection: str) -> Experiment:
  """The named experiment's settings for `collection`; InputError if it has none."""
  kind = graphs.collection_kind(collection)
  if name not in EXPERIMENTS:
    raise errors.InputError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
  settings = EXPERIMENTS[name].get(collection) or EXPERIMENTS[name].get(kind)
  if settings is None:
    raise errors.InputError(f"experiment {name!r} has no settings for {collection}; pick one of "
                            f"{', '.join(n for n, entries in EXPERIMENTS.items() if {kind, collection} & set(entries))}")
  training, model = settings
  return Experiment(name, collection, dict(training), model)


def prepare_records(experiment: Experiment, data_root, records_root, work_dir) -> str:
  """Converts the collection's splits as the experiment's model asks and returns its records dir.

  Raises GraphFileError naming the first invalid input file.
  """
  source = graphs.collection_directory(data_root, experiment.collection)
  present = [split for split in graphs.SPLITS if storage.is_directory(storage.join(source, split))]
  if "train" not in present or "valid" not in present:
    raise FileNotFoundError(f"{source}: no train/ and valid/ splits; pass a TpuGraphs npz tree as data root")
  split_dirs = [storage.join(source, split) for split in present]
  for split_dir in split_dirs:  # every split's files are there and named well before any is converted
    convert.find_source_groups(split_dir)
  experiment.model.prepare_records(experiment.collection, split_dirs, records_root, work_dir)
  return records_directory(records_root, experiment.collection)


def records_directory(records_root, collection: str) -> str:
  """Where a collection's converted splits go under records_root (which may be a URL, gs://...)."""
  return storage.join(records_root, str(graphs.collection_directory("", collection)))


def data_root_name(data_root) -> str:
  """How a run's config.json records its data root (experiment.data_root), so that programs reading
  the run can find its data and compare roots: a local path made absolute, a URL as given."""
  return str(pathlib.Path(data_root).resolve()) if storage.is_local(data_root) else os.fspath(data_root)


def check_batch_fits(experiment: Experiment, train_npz_dir) -> None:
  """Refuses, from the npz files alone (before anything is converted or written), an experiment whose
  epochs are one pass over the training chunks (no steps_per_epoch) when those chunks cannot fill
  one batch. The count is that of the records conversion would write (deduplication, applied later,
  can only lower it, and the trainer checks again)."""
  if experiment.training.get("steps_per_epoch"):
    return
  batch_size = experiment.training["batch_size"]
  paths = sorted(storage.glob(storage.join(train_npz_dir, "*.npz")))
  chunks = 0
  for path in paths:
    chunks += records.chunk_count(npz.read_graph(path, stream_configs=True), experiment.model.configs_per_chunk)
    if chunks >= batch_size:
      return
  if not paths:
    raise errors.InputError(f"{train_npz_dir}: no .npz files to train on")
  raise errors.InputError(
      f"{train_npz_dir}: {len(paths)} training graph(s) give {chunks} config chunk(s) of at most "
      f"{experiment.model.configs_per_chunk} configs, which cannot fill one batch of {batch_size}; pass a "
      f"--batch_size of at most {chunks}, or a --steps_per_epoch to sample lists from repeated passes")


# The recipe's Graph Segment Training (LayoutModel.segment_size None): where the plain model's plan
# exceeds SEGMENT_ABOVE_BYTES, segments of AUTO_SEGMENT_SIZE ops (whole unet3d fits in 3.2 GiB).
SEGMENT_ABOVE_BYTES = 8 * memory_plan.GIB
AUTO_SEGMENT_SIZE = 256


def _plan_settings(experiment: Experiment, segment_size: Optional[int]) -> memory_plan.Settings:
  model, training = experiment.model, experiment.training
  return memory_plan.Settings(
      batch_size=training["batch_size"], configs_per_graph=training["configs_per_graph"], units=model.units,
      layers=model.layers, segment_size=segment_size, configs_per_chunk=model.configs_per_chunk,
      eval_batch_size=training["eval_batch_size"], prune_hops=model.prune_hops)


def _layout_manifest(experiment: Experiment, data_root) -> dict:
  source = graphs.collection_directory(data_root, experiment.collection)
  return memory_plan.manifest([storage.join(source, split) for split in graphs.SPLITS], experiment.model.prune_hops)


def segment_length(experiment: Experiment, sizes: dict) -> Optional[int]:
  """The segment length a layout run trains and scores with (None: the plain model), from its
  manifest (memory_plan.manifest) and LayoutModel.segment_size."""
  requested = experiment.model.segment_size
  if requested == 0 or not any(sizes.values()):
    return None
  if requested is None:
    if memory_plan.plan(sizes, _plan_settings(experiment, None)).peak_bytes <= SEGMENT_ABOVE_BYTES:
      return None
    requested = AUTO_SEGMENT_SIZE
  return requested if memory_plan.largest_ops(sizes) > requested else None


def planned_memory(experiment: Experiment, data_root) -> Optional[tuple[dict, memory_plan.Plan]]:
  """A layout experiment's manifest (sizes of every split's graphs as its pruning leaves them) and
  memory plan (train/memory_plan.py), read from the npz files alone; None for other kinds or
  where the collection has no files."""
  if not isinstance(experiment.model, LayoutModel):
    return None
  sizes = _layout_manifest(experiment, data_root)
  if not any(sizes.values()):
    return None
  return sizes, memory_plan.plan(sizes, _plan_settings(experiment, segment_length(experiment, sizes)))


def model_builder(experiment: Experiment, data_root, sizes: Optional[dict] = None) -> trainer.BuildModel:
  """The builder of the model a run of `experiment` on `data_root` trains: with its training split's
  statistics and, for layout, the segment length (segment_length) of its manifest `sizes`
  (memory_plan.manifest of `data_root`, read here where not given)."""
  train_npz_dir = storage.join(graphs.collection_directory(data_root, experiment.collection), "train")
  if not isinstance(experiment.model, LayoutModel):
    return experiment.model.model_builder(train_npz_dir)
  sizes = _layout_manifest(experiment, data_root) if sizes is None else sizes
  return experiment.model.model_builder(train_npz_dir, segment_length(experiment, sizes))


def run_model_builder(run_config: dict) -> tuple[Experiment, trainer.BuildModel]:
  """The experiment a run's config.json content records (its name and collection, with the run's
  training and model settings) and the builder of the model the run trained (model_builder on its
  recorded data root, whose files must still be there). InputError for a config.json of a run that
  predates the experiment record."""
  recorded = run_config.get("experiment", {})
  if not {"name", "collection", "data_root"} <= set(recorded):
    raise errors.InputError(f"{run_config.get('out_dir')}: its config.json records no experiment with a data root "
                            "(a run of an older version); train it again")
  named = experiment(recorded["name"], recorded["collection"])
  model = {name: tuple(value) if isinstance(value, list) else value for name, value in run_config["model"].items()}
  resolved = named.overridden(training={name: run_config[name] for name in named.training if name in run_config},
                              model=model)
  return resolved, model_builder(resolved, recorded["data_root"])


def recorded_data_root(run_config: dict) -> Optional[str]:
  """The data root a run's config.json records (data_root_name), or None for runs that predate it."""
  return run_config.get("experiment", {}).get("data_root")


def progress_line(experiment: Experiment, out_dir) -> str:
  """What `train` is about to do in out_dir, for a program's progress line: a new run's epochs, or
  where a rerun resumes."""
  epochs, done = experiment.training["epochs"], run_directory.epochs_done(out_dir)
  if done == 0:
    return f"convert, train {epochs} epoch(s)"
  if done >= epochs:
    return f"resume: all {epochs} epoch(s) trained already; evaluate"
  to_train = f"epoch {epochs}" if done + 1 == epochs else f"epochs {done + 1}-{epochs}"
  return f"resume after epoch {done}: convert what is missing, train {to_train}"


def train(experiment: Experiment, data_root, out_dir, records_dir=None,
          strategy: Optional[tf.distribute.Strategy] = None, exporters: Sequence[Callable] = (),
          callbacks: Sequence[tf.keras.callbacks.Callback] = (), sizes: Optional[dict] = None) -> dict:
  """Trains one collection end to end and returns the run's metrics.json content.

  Args:
    experiment: what to train (`experiment(name, collection)`, maybe overridden).
    data_root: a TpuGraphs npz tree (the embedded data/generated/npz or the real release).
    out_dir: the run directory (see trainer.py); rerunning resumes.
    records_dir: where converted records go; default <out_dir>/records.
    strategy, exporters, callbacks: passed to trainer.run.
    sizes: a layout experiment's manifest of data_root, where the caller has it (planned_memory);
      read from the npz files otherwise.
  """
  out_dir = os.fspath(out_dir)  # a local path or a URL: joined with storage.join
  records_root = os.fspath(records_dir) if records_dir else storage.join(out_dir, "records")
  collection_records = records_directory(records_root, experiment.collection)
  config = trainer.TrainingConfig(
      train_dir=storage.join(collection_records, "train"), valid_dir=storage.join(collection_records, "valid"),
      out_dir=out_dir, model=dataclasses.asdict(experiment.model),
      experiment={"name": experiment.name, "collection": experiment.collection,
                  "data_root": data_root_name(data_root)}, **experiment.training)
  train_npz_dir = storage.join(graphs.collection_directory(data_root, experiment.collection), "train")
  # Every check that can refuse the run, before conversion writes anything (the records' default
  # place is inside out_dir): a refused run leaves out_dir as it was, ready for a corrected retry.
  strategy = strategy or strategies.choose_strategy()  # also before any TensorFlow op, as it must be
  task = experiment.task()
  trainer.check_run(task, config, strategy)
  if storage.is_directory(train_npz_dir):
    check_batch_fits(experiment, train_npz_dir)
  prepare_records(experiment, data_root, records_root, out_dir)
  test_dir = storage.join(collection_records, "test")
  config = dataclasses.replace(config, test_dir=test_dir if tf.io.gfile.isdir(test_dir) else None)
  return trainer.run(task, model_builder(experiment, data_root, sizes), config, strategy, callbacks,
                     exporters=exporters)
