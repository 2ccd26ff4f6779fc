"""Training throughput of the tile trainer on the embedded generated data: graphs/s, configs/s, RSS.

  python benchmarks/train_tile.py [--epochs 3] [--join late] [--backbone sage]

Per epoch, the time from the epoch's first step to its last (validation excluded); configs/s
counts the configs actually in the batches (a graph contributes min(its configs, k)).
"""

import argparse
import pathlib
import resource
import tempfile
import time

import tensorflow as tf

from tpu_graphs.data import convert, locations, readers
from tpu_graphs.models import tile_model
from tpu_graphs.train import inputs, tasks, trainer

EMBEDDED_TILE = locations.EMBEDDED_NPZ / "tile"


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


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--epochs", type=int, default=3)
  parser.add_argument("--join", default="late", choices=tile_model.JOINS)
  parser.add_argument("--backbone", default="sage")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--configs_per_graph", type=int, default=16)
  args = parser.parse_args()
  with tempfile.TemporaryDirectory() as work:
    convert.convert_directory(EMBEDDED_TILE, pathlib.Path(work) / "records", progress=False)
    records = pathlib.Path(work) / "records" / "tile" / "xla"
    config = trainer.TrainingConfig(str(records / "train"), str(records / "valid"), str(pathlib.Path(work) / "run"),
                                    epochs=args.epochs, batch_size=args.batch_size,
                                    configs_per_graph=args.configs_per_graph, patience=args.epochs, verbose=0)
    timer = EpochTimer()
    build = lambda spec: tile_model.build_tile_model(spec, args.join, args.backbone)
    result = trainer.run(tasks.TileTask(), build, config, callbacks=[timer])
    steps = inputs.TrainingInputs(config.train_dir, tasks.TileTask(), config.batch_size,
                                  config.configs_per_graph).steps_per_epoch
    graphs = steps * config.batch_size
    configs = configs_per_epoch(config.train_dir, config.configs_per_graph, graphs)
  print(f"tile training, {args.join} join, {args.backbone}, batch {args.batch_size} graphs, "
        f"k={args.configs_per_graph}: {graphs} graphs and {configs} configs per epoch")
  print("| epoch | seconds | graphs/s | configs/s |\n|---:|---:|---:|---:|")
  for epoch, seconds in enumerate(timer.seconds):
    print(f"| {epoch} | {seconds:.2f} | {graphs / seconds:.1f} | {configs / seconds:.1f} |")
  print(f"valid tile score {result['valid']['mean']['tile_score']:.4f}, OPA {result['valid']['mean']['opa']:.4f}")
  print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
  main()
