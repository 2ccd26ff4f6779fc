"""Padding of merged graph batches to fixed total sizes, for strategies that need static shapes.

TPUs compile one program per input shape, so every batch must have the same number of
components, nodes and edges. TF-GNN finds the tightest totals that fit every batch of a
dataset and pads each batch with one extra component holding the filler nodes and edges
(its configs have runtime 0, which tasks mask out of the labels).
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import readers


class Padding:
  """Pads each merged GraphTensor to the same totals; built once per run, from its inputs."""

  def __init__(self, constraints: tfgnn.SizeConstraints):
    self.constraints = constraints

  @classmethod
  def fitting(cls, graphs: tf.data.Dataset, batch_size: int) -> "Padding":
    """Totals that fit any `batch_size` scalar GraphTensors of `graphs` (reads the whole dataset
    once: pass one epoch of sampled graphs, e.g. `inputs.TrainingInputs.sampled_graphs(0)`)."""
    return cls(tfgnn.find_tight_size_constraints(graphs, target_batch_size=batch_size))

  def pad(self, batches: tf.data.Dataset) -> tf.data.Dataset:
    """Pads each merged GraphTensor of `batches`; the padding component comes last."""
    return readers.parallel_map(batches, lambda graph: tfgnn.pad_to_total_sizes(graph, self.constraints)[0])
