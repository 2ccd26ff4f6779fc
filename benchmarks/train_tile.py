"""Training throughput of the tile trainer on the embedded generated data: graphs/s, configs/s, RSS.

  python benchmarks/train_tile.py [--epochs 3] [--join late] [--backbone sage] [--out benchmarks/results/train_tile.md]

Per epoch, the time from the epoch's first step to its last (validation excluded); configs/s
counts the configs actually in the batches (a graph contributes min(its configs, k)). The table
goes to --out (benchmarks/benchmark_results.py).
"""

import pathlib
import resource
import tempfile
import time

from absl import flags

from baselines import program  # first: it quiets TensorFlow, which must happen before TensorFlow loads
import tensorflow as tf  # pylint: disable=g-bad-import-order

from benchmarks import benchmark_results
from tpu_graphs.data import convert, locations, readers
from tpu_graphs.models import gnn, tile_model
from tpu_graphs.train import inputs, tasks, trainer

EMBEDDED_TILE = locations.EMBEDDED_NPZ / "tile"

_EPOCHS = flags.DEFINE_integer("epochs", 3, "Training epochs; the first includes tracing.")
_JOIN = flags.DEFINE_enum("join", "late", tile_model.JOINS, "Where config features meet the graph.")
_BACKBONE = flags.DEFINE_enum("backbone", "sage", gnn.BACKBONES, "Message passing layers.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "Graphs per step.")
_CONFIGS_PER_GRAPH = flags.DEFINE_integer("configs_per_graph", 16, "Configs sampled per graph and step (k).")
_OUT = flags.DEFINE_string("out", str(benchmark_results.default_path("train_tile")), "Markdown table to write.")


class EpochTimer(tf.keras.callbacks.Callback):
  """Seconds from each epoch's start to the end of its last training step."""

  def __init__(self):
    super().__init__()
    self.seconds = []

  def on_epoch_begin(self, epoch, logs=None):
    self._start = time.perf_counter()

  def on_train_batch_end(self, batch, logs=None):
    self._last = time.perf_counter()

  def on_epoch_end(self, epoch, logs=None):
    self.seconds.append(self._last - self._start)


def configs_per_epoch(records_dir, k: int, graphs: int) -> int:
  """Configs in the first `graphs` training chunks of an epoch (same count every epoch)."""
  sizes = [int(min(k, g.node_sets["config"].total_size))
           for g in readers.training_dataset(records_dir, k, seed=0).take(graphs)]
  return sum(sizes)


def main(argv):
  del argv
  with tempfile.TemporaryDirectory() as work:
    convert.convert_directory(EMBEDDED_TILE, pathlib.Path(work) / "records", progress=False)
    records = pathlib.Path(work) / "records" / "tile" / "xla"
    config = trainer.TrainingConfig(str(records / "train"), str(records / "valid"), str(pathlib.Path(work) / "run"),
                                    epochs=_EPOCHS.value, batch_size=_BATCH_SIZE.value,
                                    configs_per_graph=_CONFIGS_PER_GRAPH.value, patience=_EPOCHS.value, verbose=0)
    timer = EpochTimer()
    build = lambda spec: tile_model.build_tile_model(spec, _JOIN.value, _BACKBONE.value)
    result = trainer.run(tasks.TileTask(), build, config, callbacks=[timer])
    steps = inputs.TrainingInputs(config.train_dir, tasks.TileTask(), config.batch_size,
                                  config.configs_per_graph).steps_per_epoch
    graphs = steps * config.batch_size
    configs = configs_per_epoch(config.train_dir, config.configs_per_graph, graphs)
  rows = ["| epoch | seconds | graphs/s | configs/s |", "|---:|---:|---:|---:|"]
  rows += [f"| {epoch} | {seconds:.2f} | {graphs / seconds:,.0f} | {configs / seconds:,.0f} |"
           for epoch, seconds in enumerate(timer.seconds)]
  rows += ["", f"Epoch 0 includes tracing. Valid tile score {result['valid']['mean']['tile_score']:.4f}, "
           f"OPA {result['valid']['mean']['opa']:.4f}; peak RSS "
           f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB."]
  benchmark_results.write(
      "train_tile", f"Tile training throughput on the embedded generated tile:xla train split ({_JOIN.value} join, "
      f"{_BACKBONE.value}, batch {_BATCH_SIZE.value} graphs, k = {_CONFIGS_PER_GRAPH.value}: {graphs} graphs and "
      f"{configs:,} configs per epoch)", "\n".join(rows), _OUT.value)


if __name__ == "__main__":
  program.run(main)
