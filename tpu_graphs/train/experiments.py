"""Experiments as data: named settings per collection, and the one place a collection is mapped to
its task, model, preparation and evaluation batch size.

An experiment (big_vision's habit) is a name, a collection, the trainer's settings and the model's
settings of the collection's kind (`TileSettings` or `LayoutSettings`): `baselines/tiles_train.py`,
`baselines/layout_train.py` and `baselines/quickstart.py` resolve one by name (`--experiment`),
override what their flags say, and hand it to `run_experiment.train`, which converts the
collection's npz files to records, builds the model and runs the trainer. The run's config.json
records the resolved experiment.

Nothing else in tpu_graphs, baselines/ or benchmarks/ looks at a collection's name to choose
what to do: the kind's settings class owns its task, model builder and preparation, and each
experiment's training settings own the evaluation batch size.

A settings class is also the table of its program's override flags: every field is declared with
`setting` (its default, and what its flag says), and baselines/training_flags.py defines one flag
per field. A new setting is one field here and its use (docs/development.md).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Union

import numpy as np

from tpu_graphs.data import config_dedup, convert, errors, graphs, npz, records, storage
from tpu_graphs.models import gnn, layout_model, layout_preprocessing, tile_model
from tpu_graphs.train import tasks, trainer


@dataclasses.dataclass(frozen=True)
class DataDerived:
  """What a run's model is built with that its settings leave to the data: the layout model's op
  feature statistics, (mean, deviation) each (140,) float32 of the training split's log-scaled op
  features (None: not normalizing), and the segment length it trains and scores with (None: the
  plain model). A run saves it (run_experiment.DATA_DERIVED_FILE), so that it exports without its
  data; tile models take nothing from the data."""
  feature_statistics: Optional[tuple[np.ndarray, np.ndarray]] = None
  segment_size: Optional[int] = None


def setting(default, help_text: str, *, at_least: Optional[int] = None, choices: Sequence[str] = (),
            none_as: Optional[int] = None) -> dataclasses.Field:
  """A field of a settings class with what its override flag takes (baselines/training_flags.py):
  its help, the least value, the choices of a string or each item of a tuple, and `none_as`, the
  flag value that stands for None where None is a setting of its own (prune_hops -1: no pruning)."""
  return dataclasses.field(default=default, metadata={
      "help": help_text, "at_least": at_least, "choices": tuple(choices), "none_as": none_as})


def from_flag_value(settings_class: type, name: str, value):
  """A flag's value as the setting `name` of `settings_class` holds it: its none_as value as None,
  a list as a tuple."""
  field = {field.name: field for field in dataclasses.fields(settings_class)}[name]
  if value is not None and value == field.metadata.get("none_as"):
    return None
  return tuple(value) if isinstance(value, list) else value


def flag_value(settings_class: type, name: str, value):
  """What the flag of the setting `name` says for the setting's `value` (from_flag_value's inverse)."""
  field = {field.name: field for field in dataclasses.fields(settings_class)}[name]
  return field.metadata.get("none_as") if value is None and field.metadata.get("none_as") is not None else value


def _convert_splits(split_dirs: Sequence[storage.PathLike], records_root, configs_per_chunk: int) -> None:
  for split_dir in split_dirs:
    convert.convert_directory(split_dir, records_root, configs_per_chunk=configs_per_chunk, progress=False)


_CONFIGS_PER_CHUNK_HELP = "Configs per record chunk: bounds memory of training and scoring."


@dataclasses.dataclass(frozen=True)
class TileSettings:
  """tile:xla's model (models/tile_model.py) and how its records are cut."""
  units: int = setting(64, "Hidden width.", at_least=1)
  layers: int = setting(3, "Message passing rounds.", at_least=1)
  backbone: str = setting("sage", "Message passing layers.", choices=gnn.BACKBONES)
  join: str = setting("late", "Where config features meet the graph.", choices=tile_model.JOINS)
  configs_per_chunk: int = setting(records.DEFAULT_CONFIGS_PER_CHUNK, _CONFIGS_PER_CHUNK_HELP, at_least=1)

  def task(self) -> tasks.TileTask:
    return tasks.TileTask()

  def prepare_records(self, collection: str, split_dirs: Sequence[storage.PathLike], records_root, work_dir) -> None:
    """Converts the collection's splits (npz directories, train first) to records under records_root."""
    del collection, work_dir  # nothing to prepare beside the records
    _convert_splits(split_dirs, records_root, self.configs_per_chunk)

  def model_builder(self, derived: DataDerived) -> trainer.BuildModel:
    """graph spec -> Keras scorer."""
    del derived  # the tile model takes nothing from the data
    return lambda spec: tile_model.build_tile_model(spec, self.join, self.backbone, self.units, self.layers)


@dataclasses.dataclass(frozen=True)
class LayoutSettings:
  """A layout model (models/layout_model.py) and the scale techniques. The defaults are the layout
  recipe's, chosen on config splits of real programs (benchmarks/real_layout.py, docs/real-data.md)."""
  units: int = setting(64, "Hidden width.", at_least=1)
  layers: int = setting(1, "Message passing rounds.", at_least=1)
  backbone: str = setting("residual_gcn", "Message passing layers.", choices=gnn.BACKBONES)
  prune_hops: Optional[int] = setting(
      0, "Keep configurable ops and their k-hop neighbourhood; -1 = no pruning. 0 keeps nlp graphs cheap: 1 hop on "
      "the 21,918-op nlp test graph keeps 2,850 ops joined by 51k edges.", at_least=-1, none_as=-1)
  dedup: bool = setting(True, "Merge training configs with identical features.")
  normalize: bool = setting(True, "Standardize log-scaled op features with training statistics.")
  # Graph Segment Training (layout_model.SegmentedScorer), a memory technique. None (the recipe):
  # segments of AUTO_SEGMENT_SIZE ops only where the plain model's memory plan exceeds
  # SEGMENT_ABOVE_BYTES (run_experiment.py), i.e. whole programs, while pruned graphs keep the plain
  # model the real-data figures measured (whole graphs ranked worse there; docs/training.md, "Whole
  # graphs and the memory plan"). N > 0: segments of N ops wherever a graph is longer. 0: off.
  segment_size: Optional[int] = setting(
      None, "Graph Segment Training (segments, one drawn per step, the rest from a score table) in segments of this "
      "many ops wherever a graph, pruned, is longer; 0 = off. Default: segments of 256 ops only where the plain "
      "model's memory plan exceeds 8 GiB (whole programs).", at_least=0)
  # GraphNorm after every round of per-config message passing. It removes each config's mean op
  # state: on real programs that helped, on unseen generated programs it hurt; real measurements
  # decide the recipe (docs/real-data.md, "GraphNorm"), which the main job trains too.
  graph_norm: bool = setting(True, "GraphNorm over a graph's ops after every round.")
  # GraphNorm divides by the spread of op states over the graph, as Cai et al.'s does. Centring only
  # (False) ranked unseen configs of one real program about as well and the unseen program worse, so
  # the recipe scales (docs/real-data.md, "GraphNorm").
  graph_norm_scale: bool = setting(True, "GraphNorm divides by the spread of op states over the graph, as Cai et "
                                   "al.'s does; --nograph_norm_scale only centres them.")
  # The model's two halves (layout_model.py): rounds of config-independent message passing, once
  # per graph, and the width of the per-config op states (None: units), whose rounds (`layers`)
  # every config pays for. On benchmarks/real_layout.py's splits one per-config round after three
  # context rounds ranked the unseen program best of one, two and three rounds, and unseen configs
  # of one program a little worse than three, at under half the per-config work of three
  # (docs/real-data.md; the variants' figures are in the message of the commit that chose it).
  context_layers: int = setting(3, "Rounds of config-independent message passing, computed once per graph.",
                                at_least=0)
  config_units: Optional[int] = setting(32, "Width of the per-config op states (default --units).", at_least=1)
  config_encodings: tuple[str, ...] = setting(
      layout_model.CONFIG_ENCODINGS, "What the model reads of each config's layouts, any of: categories (embedded "
      "layout values, else raw numbers), costs (layout changes, minor dimension sizes, (8, 128) padding waste), "
      "copies (producer/consumer layout changes); empty = raw layout values only.",
      choices=layout_model.CONFIG_ENCODINGS)
  configs_per_chunk: int = setting(256, _CONFIGS_PER_CHUNK_HELP, at_least=1)

  def size(self) -> str:
    """The model's widths and rounds in words, as result files describe the model they measured."""
    return (f"{self.units} context units, {self.context_layers} context rounds, {self.config_units or self.units} "
            f"config units, {self.layers} config rounds")

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

  def feature_statistics(self, train_npz_dir) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The op feature statistics of the training split's npz files if normalizing, else None."""
    if not self.normalize:
      return None
    return layout_preprocessing.op_feature_statistics(
        npz.read_graph(path, stream_configs=True).node_feat
        for path in storage.glob(storage.join(train_npz_dir, "*.npz")))

  def model_builder(self, derived: DataDerived) -> trainer.BuildModel:
    """graph spec -> Keras scorer, with the derived op feature statistics and segment length."""
    return lambda spec: layout_model.build_layout_model(
        spec, self.backbone, self.units, self.layers, feature_statistics=derived.feature_statistics,
        segment_size=derived.segment_size, graph_norm=self.graph_norm, graph_norm_scale=self.graph_norm_scale,
        context_layers=self.context_layers, config_units=self.config_units, config_encodings=self.config_encodings)


ModelSettings = Union[TileSettings, LayoutSettings]
# A collection's kind ('tile', 'layout') -> its task.
TASKS = {"tile": tasks.TileTask, "layout": tasks.LayoutTask}


def task_class(collection: str) -> type[tasks.Task]:
  """The Task subclass that ranks the collection's graphs."""
  return TASKS[graphs.collection_kind(collection)]


# TrainingConfig fields other than directories, per kind.
TILE_TRAINING = {"epochs": 10, "batch_size": 8, "configs_per_graph": 16, "learning_rate": 1e-3,
                 "loss": "listmle:1,mse:0.02", "patience": 5, "eval_batch_size": 8}
# The layout recipe: fixed-length epochs sampling 128-config lists afresh, all-pairs hinge, warmup +
# cosine decay, judged by a moving average of the weights; a layout chunk already holds every op of
# the graph, so chunks are scored one at a time. Lists of 128 rather than 64 configs (4x the pairs
# per list) average out more of a low-spread program's measurement noise; 1,500 steps whose weights
# are averaged (over about the last 140) ranked unseen configs of both real programs better than 500
# steps without, and the unseen program as well (docs/research.md, "Weight averaging").
LAYOUT_TRAINING = {"epochs": 10, "steps_per_epoch": 150, "batch_size": 4, "configs_per_graph": 128,
                   "learning_rate": 1e-3, "learning_rate_schedule": "cosine", "warmup_steps": 100,
                   "weight_average": 0.993, "loss": "pairwise_hinge:1", "patience": 10, "eval_batch_size": 1}

# name -> kind or collection -> (training settings, model settings); a collection's own entry wins
# over its kind's. "tile" and "layout" are the training programs' defaults; "quickstart" fits all five
# collections in a few minutes: the layout recipe (its model, lists, loss and schedule, so what a
# user runs first is what the release trains) cut to 4 epochs; "smallest" is the one-minute run the
# end-to-end tests use.
EXPERIMENTS: dict[str, dict[str, tuple[dict, ModelSettings]]] = {
    "tile": {"tile": (TILE_TRAINING, TileSettings())},
    "layout": {"layout": (LAYOUT_TRAINING, LayoutSettings())},
    "quickstart": {"tile": (dict(TILE_TRAINING, epochs=20, patience=8), TileSettings()),
                   "layout": (dict(LAYOUT_TRAINING, epochs=4, warmup_steps=40), LayoutSettings())},
    "smallest": {"tile": (dict(TILE_TRAINING, epochs=1, batch_size=4, configs_per_graph=8, patience=1),
                          TileSettings(units=16, layers=1)),
                 "layout": (dict(LAYOUT_TRAINING, epochs=1, steps_per_epoch=4, configs_per_graph=8, warmup_steps=0,
                                 patience=1),
                            LayoutSettings(units=16, layers=1, dedup=False, normalize=False, configs_per_chunk=250))},
}


@dataclasses.dataclass(frozen=True)
class Experiment:
  """One collection's training run, resolved: what `run_experiment.train` needs besides paths."""
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
