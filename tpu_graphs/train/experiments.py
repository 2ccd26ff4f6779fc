"""One collection's training run from an npz tree: the recipe every training program shares.

`baselines/tiles_train.py`, `baselines/layout_train.py` and `baselines/quickstart.py` are
configurations of `train_collection` (big_vision's habit: experiments are settings, not copies
of a training loop). It converts the collection's npz files to records (reusing finished shards),
applies the layout scale techniques that work on data (duplicate configs, feature statistics),
builds the model and hands everything to `trainer.run`.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Callable, Optional, Sequence

import tensorflow as tf

from tpu_graphs.data import config_dedup, convert, graphs, npz, records, storage
from tpu_graphs.models import layout_model, layout_preprocessing, tile_model
from tpu_graphs.train import tasks, trainer


@dataclasses.dataclass(frozen=True)
class ModelSettings:
  """The model and the scale techniques; tile uses join/backbone, layout the rest."""
  units: int = 64
  layers: int = 3
  backbone: str = "sage"
  join: str = "late"  # tile: where config features meet the graph
  prune_hops: Optional[int] = None  # layout: keep configurable ops and their k-hop neighbourhood
  dedup: bool = False  # layout: merge training configs with identical features
  normalize: bool = False  # layout: standardize log-scaled op features with training statistics
  segment_size: Optional[int] = None  # layout: Graph Segment Training
  graph_norm: bool = True  # layout: GraphNorm after every round of message passing
  cross_config_attention: bool = False  # layout: attention over the configs of a list
  config_encodings: tuple[str, ...] = layout_model.CONFIG_ENCODINGS  # layout: what the encoder reads of layouts
  configs_per_chunk: int = records.DEFAULT_CONFIGS_PER_CHUNK


# The layout recipe: what baselines/layout_train.py trains with unless its flags say otherwise, and
# what quickstart shortens. Chosen on config splits of real programs (benchmarks/real_layout.py):
# fixed-length epochs sampling 64-config lists afresh, all-pairs hinge, warmup + cosine decay.
LAYOUT_TRAINING = {"epochs": 10, "steps_per_epoch": 50, "batch_size": 4, "configs_per_graph": 64,
                   "learning_rate": 1e-3, "learning_rate_schedule": "cosine", "warmup_steps": 100,
                   "loss": "pairwise_hinge:1", "patience": 10, "eval_batch_size": 1}
LAYOUT_MODEL = ModelSettings(units=64, layers=3, backbone="residual_gcn", prune_hops=0, dedup=True, normalize=True,
                             configs_per_chunk=256)


def collection_directory(data_root, collection: str) -> pathlib.Path:
  """<data_root>/tile/xla or <data_root>/layout/<source>/<search>."""
  return pathlib.Path(data_root, *collection.split(":"))


def prepare_records(data_root, collection: str, records_root, work_dir, model: ModelSettings) -> str:
  """Converts the collection's splits (train deduplicated if asked) and returns its records dir.

  Raises GraphFileError naming the first invalid input file.
  """
  source = collection_directory(data_root, collection)
  if not (source / "train").is_dir() or not (source / "valid").is_dir():
    raise FileNotFoundError(f"{source}: no train/ and valid/ splits; pass a TpuGraphs npz tree as data root")
  relative = pathlib.Path(*collection.split(":"))
  split_dirs = [source / split for split in graphs.SPLITS if (source / split).is_dir()]
  if model.dedup and graphs.collection_kind(collection) == "layout":
    deduplicated = pathlib.Path(work_dir) / "dedup" / relative / "train"
    config_dedup.deduplicate_directory(source / "train", deduplicated)
    split_dirs[0] = deduplicated
  for split_dir in split_dirs:
    convert.convert_directory(split_dir, records_root, configs_per_chunk=model.configs_per_chunk, progress=False)
  return storage.join(records_root, str(relative))  # records_root may be a URL (gs://...)


def model_builder(collection: str, model: ModelSettings, train_npz_dir) -> Callable:
  """graph spec -> Keras scorer for the collection, with training statistics where asked."""
  if graphs.collection_kind(collection) == "tile":
    return lambda spec: tile_model.build_tile_model(spec, model.join, model.backbone, model.units, model.layers)
  statistics = None
  if model.normalize:
    statistics = layout_preprocessing.op_feature_statistics(
        npz.read_graph(path, stream_configs=True).node_feat for path in sorted(pathlib.Path(train_npz_dir).glob("*.npz")))
  return lambda spec: layout_model.build_layout_model(
      spec, model.backbone, model.units, model.layers, feature_statistics=statistics,
      segment_size=model.segment_size, graph_norm=model.graph_norm,
      cross_config_attention=model.cross_config_attention, config_encodings=model.config_encodings)


def train_collection(collection: str, data_root, out_dir, training: dict, model: ModelSettings = ModelSettings(),
                     records_dir=None, strategy: Optional[tf.distribute.Strategy] = None,
                     exporters: Sequence[Callable] = (), callbacks: Sequence[tf.keras.callbacks.Callback] = ()) -> dict:
  """Trains one collection end to end and returns the run's metrics.json content.

  Args:
    collection: 'tile:xla' or 'layout:<source>:<search>'.
    data_root: a TpuGraphs npz tree (the embedded data/generated/npz or the real release).
    out_dir: the run directory (see trainer.py); rerunning resumes.
    training: TrainingConfig fields other than the directories (epochs, batch_size, ...).
    model: model settings and layout scale techniques.
    records_dir: where converted records go; default <out_dir>/records.
    strategy, exporters, callbacks: passed to trainer.run.
  """
  out_dir = os.fspath(out_dir)  # a local path or a URL: joined with storage.join
  records_root = records_dir or storage.join(out_dir, "records")
  collection_records = prepare_records(data_root, collection, records_root, out_dir, model)
  task = tasks.TileTask() if graphs.collection_kind(collection) == "tile" else tasks.LayoutTask(model.prune_hops)
  test_dir = storage.join(collection_records, "test")
  config = trainer.TrainingConfig(
      train_dir=storage.join(collection_records, "train"), valid_dir=storage.join(collection_records, "valid"),
      out_dir=out_dir, test_dir=test_dir if tf.io.gfile.isdir(test_dir) else None, model=dataclasses.asdict(model),
      **training)
  build = model_builder(collection, model, collection_directory(data_root, collection) / "train")
  return trainer.run(task, build, config, strategy, callbacks, exporters=exporters)
