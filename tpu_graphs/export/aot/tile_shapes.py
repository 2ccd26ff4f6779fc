"""Static-shape tile scoring signatures a compiler can compile ahead of time (XLA AOT): the buckets.

`saved_model_cli aot_compile_cpu` (tfcompile) turns a signature into one C++ class, but only for
inputs of fixed shapes. A tile kernel is therefore sent in a *bucket*: its arrays padded to the
bucket's rows, with the real counts beside them:

    node_feat (N, 140) float32, node_opcode (N,) uint8, edge_index (E, 2) int64 [consumer, producer],
    config_feat (C, 24) float32, num_nodes, num_edges, num_configs () int32
    -> scores (C,) float32; only the first num_configs are meaningful.

A late-join model (the default) runs its layers on the arrays directly, arranged for one small
kernel, with the rows past the counts masked (tile_scores.py: half the arithmetic or
less), and in three programs rather than one (a *split* bucket), so that a caller can run the
kernel's half and the configs' half at once on two cores (native/library/tile_library.cc):

    kernel:  node_feat, node_opcode, edge_index, num_nodes, num_edges -> kernel_part (units,)
             float32, per bucket of ops and edges;
    configs: config_feat (C, 24) -> config_part (C, units) float32, one for all buckets;
    join:    kernel_part, config_part, num_configs -> scores (C,), one for all buckets.

Any other model is one program per bucket, which gets the rows past the counts as a second graph
component, as TF-GNN pads a training batch for a TPU (tpu_graphs/train/padding.py): filler ops,
filler edges joining filler ops only, filler configs; the real component never reads them
(pooling, broadcasting and message passing stay within a component). Either way the scores equal
the plain signature's, and filler rows may hold anything.

The signature checks nothing: a compiled program cannot refuse its input, so the caller checks
counts, ids and finiteness before the call (native/library/tile_library.cc does, as the plain signature's
`saved_model.checked_arrays` would). Above the largest bucket the caller refuses the kernel; more
than C configs are sent C at a time.

Buckets follow the sizes of tile kernels: the real sample's kernels have 2 / 18 / 65 ops
(min / median / max), the generated ones up to 249, and kernels have about as many edges as ops
(52 / 55, 15 / 15, 65 / 70 in the sample), so each bucket allows twice as many edges as ops.
Every bucket is one compiled class, and a call costs about in proportion to its bucket's ops, so
the buckets double up to 128 ops (the sample's 2, 15, 21, 52 and 65-op kernels land in 16, 16,
32, 64 and 128), then one of 512 for the rare large kernel.
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs


_SIGNATURE = re.compile(r"static_tile(_kernel)?_n(\d+)_e(\d+)_c(\d+)")


@dataclasses.dataclass(frozen=True)
class TileBucket:
  """Padded sizes of one bucket: N ops, E edges, C configs per call; `split`: a late-join model's
  three programs (see the module docstring), else one."""
  nodes: int
  edges: int
  configs: int
  split: bool = False
  kind: ClassVar[str] = "tile"

  @property
  def signature_name(self) -> str:
    """The name of the bucket's own signature: the whole program's, or a split bucket's kernel half's."""
    return f"static_tile{'_kernel' if self.split else ''}_n{self.nodes}_e{self.edges}_c{self.configs}"

  @property
  def configs_signature_name(self) -> str:
    """A split bucket's configs half, the same for every bucket of a model."""
    return f"static_tile_configs_c{self.configs}"

  @property
  def join_signature_name(self) -> str:
    """A split bucket's join, the same for every bucket of a model."""
    return f"static_tile_join_c{self.configs}"

  @classmethod
  def from_signature_name(cls, name: str) -> Optional["TileBucket"]:
    """The bucket a whole or kernel signature's name describes, or None for another signature."""
    match = _SIGNATURE.fullmatch(name)
    return cls(*map(int, match.groups()[1:]), split=match.group(1) is not None) if match else None

  def programs(self) -> list[tuple[str, str]]:
    """(signature, C++ class) of each program the bucket calls in a native library: the whole
    program, or a split bucket's kernel half, configs half and join (the last two every bucket's
    the same)."""
    if not self.split:
      return [(self.signature_name, f"TileN{self.nodes}E{self.edges}C{self.configs}")]
    return [(self.signature_name, f"TileKernelN{self.nodes}E{self.edges}"),
            (self.configs_signature_name, f"TileConfigsC{self.configs}"),
            (self.join_signature_name, f"TileJoinC{self.configs}")]

  @property
  def header_macro(self) -> str:
    """The macro of the native library's buckets.h that lists buckets of this type
    (native/model_library.cc), and the sizes each entry gives after its classes."""
    return "TPU_GRAPHS_FOR_EACH_SPLIT_BUCKET" if self.split else "TPU_GRAPHS_FOR_EACH_BUCKET"

  @property
  def header_sizes(self) -> tuple[int, ...]:
    return (self.nodes, self.edges, self.configs)

  header_defines: ClassVar[str] = ""  # constants buckets.h defines for the library's code: none


CONFIGS_PER_CALL = 128
TILE_BUCKETS = tuple(TileBucket(nodes, 2 * nodes, CONFIGS_PER_CALL) for nodes in (16, 32, 64, 128, 512))
SPLIT_TILE_BUCKETS = tuple(dataclasses.replace(bucket, split=True) for bucket in TILE_BUCKETS)
COUNT_NAMES = ("num_nodes", "num_edges", "num_configs")


def _config_spec(bucket: TileBucket) -> tf.TensorSpec:
  return tf.TensorSpec([bucket.configs, graphs.TILE_CONFIG_FEATURE_WIDTH], tf.float32, "config_feat")


def input_specs(bucket: TileBucket) -> tuple[tf.TensorSpec, ...]:
  """The whole program's inputs, in argument order."""
  return (tf.TensorSpec([bucket.nodes, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
          tf.TensorSpec([bucket.nodes], tf.uint8, "node_opcode"),
          tf.TensorSpec([bucket.edges, 2], tf.int64, "edge_index"),
          _config_spec(bucket),
          *(tf.TensorSpec([], tf.int32, name) for name in COUNT_NAMES))


def kernel_input_specs(bucket: TileBucket) -> tuple[tf.TensorSpec, ...]:
  """A split bucket's kernel half's inputs, in argument order."""
  return (*input_specs(bucket)[:3], *(tf.TensorSpec([], tf.int32, name) for name in COUNT_NAMES[:2]))


def configs_input_specs(bucket: TileBucket) -> tuple[tf.TensorSpec, ...]:
  """A split bucket's configs half's inputs."""
  return (_config_spec(bucket),)


def join_input_specs(bucket: TileBucket, units: int) -> tuple[tf.TensorSpec, ...]:
  """A split bucket's join's inputs: the two halves' outputs and the count of real configs."""
  return (tf.TensorSpec([units], tf.float32, "kernel_part"),
          tf.TensorSpec([bucket.configs, units], tf.float32, "config_part"),
          tf.TensorSpec([], tf.int32, "num_configs"))


def _split(count: tf.Tensor, total: int) -> tf.Tensor:
  """(2,) int64 component sizes: the real `count` rows, then the filler rows."""
  count = tf.cast(count, tf.int64)
  return tf.stack([count, total - count])


def padded_tile_graph(node_feat, node_opcode, edge_index, config_feat, num_nodes, num_edges,
                      num_configs) -> tfgnn.GraphTensor:
  """The tile GraphTensor of a bucket's arrays: component 0 the kernel, component 1 the filler.

  One filler op (row N, zeros) is appended so that filler edges (every row from num_edges on)
  have a filler op to join even when the kernel fills all N rows. Context features are those a
  joined record has besides its strings (xla.model_features drops those).
  """
  nodes, edges, configs = node_feat.shape[0], edge_index.shape[0], config_feat.shape[0]
  filler_op = tf.constant(nodes, tf.int64)
  real_edge = tf.range(edges) < tf.cast(num_edges, tf.int32)
  edge_index = tf.where(real_edge[:, tf.newaxis], edge_index, filler_op)
  op = tfgnn.NodeSet.from_fields(sizes=_split(num_nodes, nodes + 1), features={
      "feat": tf.concat([node_feat, tf.zeros([1, graphs.NODE_FEATURE_WIDTH])], 0),
      "opcode": tf.concat([tf.cast(node_opcode, tf.int64), [0]], 0)})
  feeds = tfgnn.EdgeSet.from_fields(sizes=_split(num_edges, edges), adjacency=tfgnn.Adjacency.from_indices(
      ("op", edge_index[:, 1]), ("op", edge_index[:, 0])))
  config = tfgnn.NodeSet.from_fields(sizes=_split(num_configs, configs), features={
      "config_index": tf.range(configs, dtype=tf.int64), "runtime": tf.zeros([configs], tf.int64),
      "feat": config_feat, "normalizer": tf.ones([configs], tf.int64)})
  context = tfgnn.Context.from_fields(sizes=tf.ones([2], tf.int64), features={
      "num_configs": tf.cast(tf.stack([num_configs, 0]), tf.int64), "num_chunks": tf.ones([2], tf.int64)})
  return tfgnn.GraphTensor.from_pieces(context=context, node_sets={"op": op, "config": config},
                                       edge_sets={"feeds": feeds})
