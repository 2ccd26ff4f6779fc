"""The training inputs of a run: one provider reads a records directory's manifest once and hands
each input pipeline its (graph, labels) batches (TF-GNN runner's DatasetProvider).

Epoch e samples its configs with seed `seed + epoch`, so it always sees the same configs in the same
order; each replica batches `batch_size / replicas` graphs and merges them into one GraphTensor
(padded to static sizes when a `padding.Padding` is given); each worker's pipeline keeps its own
share of those batches.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import errors, readers
from tpu_graphs.train import padding, tasks, xla

# Parsed records index with int32, sampled training graphs with int64; the scorer (and the model
# exported from it) sees one dtype, the one tfgnn.parse_example gives.
INDICES_DTYPE = tf.int32


def merged_batches(graphs: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
  """Batches of `batch_size` scalar GraphTensors merged into one GraphTensor of as many components."""
  return readers.parallel_map(graphs.batch(batch_size, drop_remainder=drop_remainder),
                              lambda g: g.merge_batch_to_components().with_indices_dtype(INDICES_DTYPE))


def chunk_count(records_dir) -> int:
  """Config chunks of every graph under records_dir, from its manifest."""
  manifest = readers.read_manifest(records_dir)
  return sum(g["chunks"] for shard in manifest["shards"] for g in shard["graphs"])


class TrainingInputs:
  """Sampled training batches of one records directory for one task.

  The manifest is read once, here; datasets are built lazily, on the first call of `get_dataset`
  or `graph_spec` that needs them.
  """

  def __init__(self, records_dir, task: tasks.Task, batch_size: int, configs_per_graph: int, seed: int = 0,
               steps_per_epoch: Optional[int] = None):
    """steps_per_epoch: steps of one epoch; None = one pass over every chunk in full batches.

    Raises InputError when one pass is asked for and the chunks cannot fill one batch.
    """
    self.records_dir, self.task, self.seed = records_dir, task, seed
    self.batch_size, self.configs_per_graph = batch_size, configs_per_graph
    self.chunks = chunk_count(records_dir)
    if not steps_per_epoch and self.chunks < batch_size:
      raise errors.InputError(f"{records_dir}: {self.chunks} graph chunks cannot fill one batch of {batch_size}")
    # A fixed step count keeps runs on a handful of graphs long enough to learn: lists are then
    # sampled from as many passes over the chunks as an epoch needs, each with fresh configs.
    self.steps_per_epoch = steps_per_epoch or self.chunks // batch_size
    self.passes = -(-self.steps_per_epoch * batch_size // self.chunks)
    self._epoch_batches: dict = {}  # (epoch, replicas, pipelines, pipeline id) -> unpadded batches

  def sampled_graphs(self, epoch: int) -> tf.data.Dataset:
    """Scalar GraphTensors of one epoch, each chunk with configs_per_graph sampled configs."""
    return readers.training_dataset(self.records_dir, self.configs_per_graph, self.seed + epoch,
                                    structure_transform=self.task.structure_transform, passes=self.passes)

  def epoch_batches(self, epoch: int, context: tf.distribute.InputContext,
                    static_padding: Optional[padding.Padding] = None) -> tf.data.Dataset:
    """One pipeline's merged GraphTensor batches of one epoch (see `get_dataset`).

    Unpadded ones are kept once built: building traces every function of the pipeline, which costs
    seconds, and a run builds epoch 0 twice, for `graph_spec` and for training. A dataset's seeds
    are fixed when it is built (the op seeds and the global one, which `trainer.run` sets first), so
    the kept one gives what a rebuilt one would. Padded ones (TPUs, XLA) are built anew each time: a
    TPU's pipelines are built on its hosts' devices, not where the spec was read.
    """
    replica_batch = context.get_per_replica_batch_size(self.batch_size)
    key = (epoch, context.num_replicas_in_sync, context.num_input_pipelines, context.input_pipeline_id)
    if static_padding or key not in self._epoch_batches:
      # Static batch sizes only where padding makes every shape static: MirroredStrategy's
      # iterator must be able to make empty batches of the element spec.
      batches = merged_batches(self.sampled_graphs(epoch), replica_batch, drop_remainder=bool(static_padding))
      batches = batches.take(self.steps_per_epoch * context.num_replicas_in_sync).shard(
          context.num_input_pipelines, context.input_pipeline_id)
      if static_padding:
        return static_padding.pad(batches)
      self._epoch_batches[key] = batches
    return self._epoch_batches[key]

  def get_dataset(self, first_epoch: int, epochs: int, context: Optional[tf.distribute.InputContext] = None,
                  static_padding: Optional[padding.Padding] = None) -> tf.data.Dataset:
    """One input pipeline's (graph, labels (b, k)) batches of epochs first_epoch .. epochs - 1.

    Each batch holds one replica's share of batch_size graphs, padded by `static_padding` when
    given. An epoch is steps_per_epoch * replicas batches, the same sequence in every pipeline (one
    per worker, see `context`); pipeline i keeps batches i, i + pipelines, ..., one per local
    replica and step. So epochs stay aligned with Keras' epochs however the replicas take them, no
    batch is used twice in an epoch, and with one replica per worker the batches of a step are
    those a single process takes in that step: the same updates at the same global batch size.
    (Sharding is by batch, not by file, so every worker reads all records: simple and exact, at the
    cost of reading work that grows with the number of workers.)
    """
    context = context or tf.distribute.InputContext()
    datasets = [self.epoch_batches(epoch, context, static_padding) for epoch in range(first_epoch, epochs)]
    batches = datasets[0]
    for dataset in datasets[1:]:
      batches = batches.concatenate(dataset)
    return readers.parallel_map(
        batches, lambda graph: (xla.model_features(graph), self.task.labels(graph, self.configs_per_graph))
    ).prefetch(tf.data.AUTOTUNE)

  def graph_spec(self, replicas: int = 1, static_padding: Optional[padding.Padding] = None) -> tfgnn.GraphTensorSpec:
    """Spec of one replica's merged batch: what the model is built on. Reads no records."""
    context = tf.distribute.InputContext(num_replicas_in_sync=replicas)
    return self.get_dataset(0, 1, context, static_padding).element_spec[0]
