"""Running one experiment end to end: npz files -> records -> the trainer -> a self-contained run.

`train` converts the collection's npz files to records (reusing finished shards), applies the
layout techniques that work on data (duplicate configs, feature statistics, the segment length the
memory plan asks for), builds the model and runs `trainer.run`. What the model takes from the data
is saved in the run directory (DATA_DERIVED_FILE), so `run_model_builder` rebuilds a finished run's
model (for export/saved_model.export_run) from the run directory alone, whether or not its data is
still there.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from tpu_graphs.data import convert, errors, graphs, npz, records, storage
from tpu_graphs.train import experiments, memory_plan, run_directory, strategies, trainer

# The run directory's record of experiments.DataDerived.
DATA_DERIVED_FILE = "data_derived.json"


def prepare_records(experiment: experiments.Experiment, data_root, records_root, work_dir,
                    source: Optional[str] = None) -> str:
  """Converts the collection's splits as the experiment's model asks and returns its records dir.
  `source`: the collection's npz folder under data_root, where the caller has it.

  Raises GraphFileError naming the first invalid input file.
  """
  source = source or graphs.collection_directory(data_root, experiment.collection)
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


def check_batch_fits(experiment: experiments.Experiment, train_npz_dir) -> None:
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


# The recipe's Graph Segment Training (LayoutSettings.segment_size None): where the plain model's plan
# exceeds SEGMENT_ABOVE_BYTES (whole programs), segments of AUTO_SEGMENT_SIZE ops.
SEGMENT_ABOVE_BYTES = 8 * memory_plan.GIB
AUTO_SEGMENT_SIZE = 256


def _plan_settings(experiment: experiments.Experiment, segment_size: Optional[int]) -> memory_plan.Settings:
  model, training = experiment.model, experiment.training
  return memory_plan.Settings(
      batch_size=training["batch_size"], configs_per_graph=training["configs_per_graph"], units=model.units,
      layers=model.layers, segment_size=segment_size, configs_per_chunk=model.configs_per_chunk,
      eval_batch_size=training["eval_batch_size"], prune_hops=model.prune_hops)


def planned_memory(experiment: experiments.Experiment, data_root) -> Optional[tuple[dict, memory_plan.Plan]]:
  """A layout experiment's manifest (sizes of every split's graphs as its pruning leaves them) and
  memory plan (train/memory_plan.py) of the model it trains, whose segment length (the plan's
  settings.segment_size; None: the plain model) follows LayoutSettings.segment_size; read from the
  npz files alone; None for other kinds or where the collection has no files. Each plan is made
  once: the plain model's, where the recipe's choice of segments needs it, and the model's."""
  if not isinstance(experiment.model, experiments.LayoutSettings):
    return None
  return _planned(experiment, graphs.collection_directory(data_root, experiment.collection))


def _planned(experiment: experiments.Experiment, source) -> Optional[tuple[dict, memory_plan.Plan]]:
  """planned_memory of the collection's npz folder `source`."""
  sizes = memory_plan.manifest([storage.join(source, split) for split in graphs.SPLITS], experiment.model.prune_hops)
  if not any(sizes.values()):
    return None
  requested, plain = experiment.model.segment_size, None
  if requested is None:  # the recipe: segments only where the plain model's plan is too large
    plain = memory_plan.plan(sizes, _plan_settings(experiment, None))
    requested = AUTO_SEGMENT_SIZE if plain.peak_bytes > SEGMENT_ABOVE_BYTES else 0
  segment_size = requested if requested and memory_plan.largest_ops(sizes) > requested else None
  if segment_size is None and plain is not None:
    return sizes, plain
  return sizes, memory_plan.plan(sizes, _plan_settings(experiment, segment_size))


def data_derived(experiment: experiments.Experiment, source,
                 planned: Optional[tuple[dict, memory_plan.Plan]] = None) -> experiments.DataDerived:
  """What the model of a run of `experiment` on the collection's npz folder `source`
  (graphs.collection_directory) takes from the data: for layout, its training split's op feature
  statistics and the segment length of its memory plan (`planned`, planned_memory's, made here
  where not given)."""
  if not isinstance(experiment.model, experiments.LayoutSettings):
    return experiments.DataDerived()
  planned = planned or _planned(experiment, source)
  segment_size = planned[1].settings.segment_size if planned else None
  return experiments.DataDerived(experiment.model.feature_statistics(storage.join(source, "train")), segment_size)


def write_data_derived(run_dir, derived: experiments.DataDerived) -> None:
  """Saves `derived` as <run_dir>/DATA_DERIVED_FILE (JSON; float32 statistics round-trip exactly)."""
  statistics = derived.feature_statistics
  run_directory.write_json(storage.join(run_dir, DATA_DERIVED_FILE), {
      "segment_size": derived.segment_size,
      "feature_statistics": None if statistics is None else {"mean": statistics[0].tolist(),
                                                             "deviation": statistics[1].tolist()}})


def read_data_derived(run_dir) -> experiments.DataDerived:
  """What <run_dir>/DATA_DERIVED_FILE saved; RunDirectoryError, saying how to write it, for a run of a
  version that did not save it, and naming the file where it is damaged."""
  path = storage.join(run_dir, DATA_DERIVED_FILE)
  saved = run_directory.read_run_json(run_dir, DATA_DERIVED_FILE, dict)
  if saved is None:
    raise run_directory.RunDirectoryError(
        f"{path}: not found (a run of an older version, which rebuilt its model from its data); rerun the "
        "command that trained it with the same --out_dir and data (nothing is left to train: it writes this "
        "file and exports again), or train it again")
  try:
    statistics, segment_size = saved["feature_statistics"], saved["segment_size"]
    if statistics is not None:
      statistics = tuple(np.asarray(statistics[name], np.float32) for name in ("mean", "deviation"))
      if any(values.shape != (graphs.NODE_FEATURE_WIDTH,) for values in statistics):
        raise ValueError(f"feature statistics of shape {statistics[0].shape}, not ({graphs.NODE_FEATURE_WIDTH},)")
    if segment_size is not None and (not isinstance(segment_size, int) or segment_size < 1):
      raise ValueError(f"segment_size {segment_size!r} is no positive integer")
  except (KeyError, TypeError, ValueError) as error:
    raise run_directory.RunDirectoryError(f"{path}: damaged ({type(error).__name__}: {error})") from None
  return experiments.DataDerived(statistics, segment_size)


def run_model_builder(run_dir, run_config: dict) -> tuple[experiments.Experiment, trainer.BuildModel]:
  """The experiment a run's config.json content records (its name and collection, with the run's
  training and model settings) and the builder of the model the run trained, from what the run
  directory saved of its data (read_data_derived): the data itself is not read. InputError for a
  config.json of a run that predates the experiment record."""
  recorded = run_config.get("experiment", {})
  if not {"name", "collection", "data_root"} <= set(recorded):
    raise errors.InputError(f"{storage.join(run_dir, 'config.json')}: records no experiment with a data root "
                            "(a run of an older version); train it again")
  named = experiments.experiment(recorded["name"], recorded["collection"])
  model = {name: tuple(value) if isinstance(value, list) else value for name, value in run_config["model"].items()}
  resolved = named.overridden(training={name: run_config[name] for name in named.training if name in run_config},
                              model=model)
  return resolved, resolved.model.model_builder(read_data_derived(run_dir))


def recorded_data_root(run_config: dict) -> Optional[str]:
  """The data root a run's config.json records (data_root_name), or None for runs that predate it."""
  return run_config.get("experiment", {}).get("data_root")


def progress_line(experiment: experiments.Experiment, out_dir) -> str:
  """What `train` is about to do in out_dir, for a program's progress line: a new run's epochs, or
  where a rerun resumes."""
  epochs, done = experiment.training["epochs"], run_directory.epochs_done(out_dir)
  if done == 0:
    return f"convert, train {epochs} epoch(s)"
  if done >= epochs:
    return f"resume: all {epochs} epoch(s) trained already; evaluate"
  to_train = f"epoch {epochs}" if done + 1 == epochs else f"epochs {done + 1}-{epochs}"
  return f"resume after epoch {done}: convert what is missing, train {to_train}"


def train(experiment: experiments.Experiment, data_root, out_dir, records_dir=None,
          strategy: Optional[tf.distribute.Strategy] = None, exporters: Sequence[Callable] = (),
          callbacks: Sequence[tf.keras.callbacks.Callback] = (),
          planned: Optional[tuple[dict, memory_plan.Plan]] = None) -> dict:
  """Trains one collection end to end and returns the run's metrics.json content.

  Args:
    experiment: what to train (`experiments.experiment(name, collection)`, maybe overridden).
    data_root: a TpuGraphs npz tree (the embedded data/generated/npz or the real release).
    out_dir: the run directory (run_directory.py; this adds DATA_DERIVED_FILE); rerunning resumes.
    records_dir: where converted records go; default <out_dir>/records.
    strategy, exporters, callbacks: passed to trainer.run.
    planned: a layout experiment's manifest and memory plan (planned_memory), where the caller has
      them; made from the npz files otherwise.
  """
  out_dir = os.fspath(out_dir)  # a local path or a URL: joined with storage.join
  records_root = os.fspath(records_dir) if records_dir else storage.join(out_dir, "records")
  collection_records = records_directory(records_root, experiment.collection)
  config = trainer.TrainingConfig(
      train_dir=storage.join(collection_records, "train"), valid_dir=storage.join(collection_records, "valid"),
      out_dir=out_dir, model=dataclasses.asdict(experiment.model),
      experiment={"name": experiment.name, "collection": experiment.collection,
                  "data_root": data_root_name(data_root)}, **experiment.training)
  source = graphs.collection_directory(data_root, experiment.collection)
  train_npz_dir = storage.join(source, "train")
  # Every check that can refuse the run, before conversion writes anything (the records' default
  # place is inside out_dir): a refused run leaves out_dir as it was, ready for a corrected retry.
  strategy = strategy or strategies.choose_strategy()  # also before any TensorFlow op, as it must be
  task = experiment.task()
  run_dir = trainer.check_run(task, config, strategy)["out_dir"]  # this worker's (strategies.worker_directory)
  if storage.is_directory(train_npz_dir):
    check_batch_fits(experiment, train_npz_dir)
  prepare_records(experiment, data_root, records_root, out_dir, source)
  test_dir = storage.join(collection_records, "test")
  config = dataclasses.replace(config, test_dir=test_dir if tf.io.gfile.isdir(test_dir) else None)
  derived = data_derived(experiment, source, planned)
  storage.makedirs(run_dir)
  write_data_derived(run_dir, derived)
  return trainer.run(task, experiment.model.model_builder(derived), config, strategy, callbacks, exporters=exporters)
