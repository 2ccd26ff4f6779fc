"""TpuGraphs graphs as TF-GNN GraphTensors, split into records that never hold all configs.

One schema per collection (`data/schemas/{tile,layout}.pbtxt`) describes the GraphTensor that
models consume: op nodes with data flow, plus a chunk of configs. On disk a graph becomes

* one *structure* record: the GraphTensor with every op node and edge, and no configs;
* one *chunk* record per `chunk_configs(...)` configs (at most `configs_per_chunk`, and at most
  `chunk_bytes` of config features): the GraphTensor with those configs and no op nodes (for
  layout, `node_config` nodes and their `belongs_to` edges).

Both are valid GraphTensors of the same schema, so `tfgnn.parse_example` reads either; `join`
puts a structure and a chunk back together (inside tf.data) and adds the layout `configures`
edges, which follow from each op's `config_slot`. A 100k-config layout graph is therefore never
one Example, and a reader holds one chunk at a time.
"""

from __future__ import annotations

import functools
import pathlib
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import example_encoding, graphs

SCHEMA_DIR = pathlib.Path(__file__).resolve().parents[2] / "data" / "schemas"
# Which pieces of the schema each record kind carries; the other record kind holds them empty.
STRUCTURE_NODE_SETS = {"tile": ("op",), "layout": ("op", "node_split")}
STRUCTURE_EDGE_SETS = {"tile": ("feeds",), "layout": ("feeds",)}
CONFIG_NODE_SETS = {"tile": ("config",), "layout": ("config", "node_config")}
CONFIG_EDGE_SETS = {"tile": (), "layout": ("belongs_to", "configures")}
DEFAULT_CONFIGS_PER_CHUNK = 1000
# Bounds the memory of writing and reading one chunk: a 848-node nlp graph gets 68 configs/chunk.
DEFAULT_CHUNK_BYTES = 4 << 20


@functools.lru_cache(maxsize=None)
def read_schema(kind: str) -> tfgnn.GraphSchema:
  """The GraphSchema of 'tile' or 'layout' graphs, read from data/schemas."""
  path = SCHEMA_DIR / f"{kind}.pbtxt"
  if not path.exists():
    raise FileNotFoundError(f"{path}: schema for collection kind {kind!r} not found")
  return tfgnn.read_schema(str(path))


@functools.lru_cache(maxsize=None)
def graph_spec(kind: str) -> tfgnn.GraphTensorSpec:
  """GraphTensorSpec (scalar, one component) for 'tile' or 'layout' graphs."""
  return tfgnn.create_graph_spec_from_schema_pb(read_schema(kind))


def chunk_configs(graph: graphs.Graph, configs_per_chunk: int = DEFAULT_CONFIGS_PER_CHUNK,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
  """Configs per chunk record for this graph: as many as fit both limits, at least one."""
  features = graph.config_feat if isinstance(graph, graphs.TileGraph) else graph.node_config_feat
  bytes_per_config = 4 * int(np.prod(features.shape[1:]))
  return max(1, min(configs_per_chunk, chunk_bytes // bytes_per_config))


def chunk_count(graph: graphs.Graph, configs_per_chunk: int = DEFAULT_CONFIGS_PER_CHUNK,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
  """Config-chunk records graph_records writes for this graph."""
  return -(-graph.num_configs // chunk_configs(graph, configs_per_chunk, chunk_bytes))


def _context(graph: graphs.Graph, configs_in_chunk: int) -> tfgnn.Context:
  features = {
      "graph_id": tf.constant([graph.graph_id]),
      "collection": tf.constant([graph.collection]),
      "num_configs": tf.constant([graph.num_configs], tf.int64),
      "num_chunks": tf.constant([-(-graph.num_configs // configs_in_chunk)], tf.int64),
  }
  return tfgnn.Context.from_fields(features=features, sizes=tf.constant([1]))


def _empty_pieces(kind: str, node_set_names, edge_set_names) -> tuple[dict, dict]:
  """Size-0 node and edge sets, so each record kind is a complete GraphTensor of the schema."""
  spec = graph_spec(kind)
  node_sets = {}
  for name in node_set_names:
    features = spec.node_sets_spec[name].features_spec
    node_sets[name] = tfgnn.NodeSet.from_fields(
        sizes=tf.zeros([1], tf.int64),
        features={f: tf.zeros([0] + features[f].shape[1:].as_list(), features[f].dtype) for f in features})
  none = tf.zeros([0], tf.int64)
  edge_sets = {name: tfgnn.EdgeSet.from_fields(
      sizes=tf.zeros([1], tf.int64),
      adjacency=tfgnn.Adjacency.from_indices((spec.edge_sets_spec[name].adjacency_spec.source_name, none),
                                             (spec.edge_sets_spec[name].adjacency_spec.target_name, none)))
               for name in edge_set_names}
  return node_sets, edge_sets


def _kind(graph: graphs.Graph) -> str:
  return "tile" if isinstance(graph, graphs.TileGraph) else "layout"


def structure_graph_tensor(graph: graphs.Graph, configs_in_chunk: int) -> tfgnn.GraphTensor:
  """The graph's ops and data flow with no configs: (n ops, m feeds edges).

  `configs_in_chunk` (see chunk_configs) only sets the context's num_chunks.
  """
  layout = isinstance(graph, graphs.LayoutGraph)
  return structure_from_arrays(_kind(graph), graph.node_feat, graph.node_opcode, graph.edge_index,
                               node_config_ids=graph.node_config_ids if layout else None,
                               node_splits=graph.node_splits if layout else None,
                               context=_context(graph, configs_in_chunk))


def config_chunk_graph_tensor(graph: graphs.Graph, start: int, config_features: np.ndarray,
                              configs_in_chunk: int) -> tfgnn.GraphTensor:
  """Configs start .. start + k of the graph with no ops.

  Args:
    graph: the source graph; its config-feature array is not read (it may be streamed).
    start: index of the chunk's first config.
    config_features: the chunk's rows of `config_feat` (k, 24) or `node_config_feat` (k, nc, 18).
    configs_in_chunk: the graph's chunk size (see chunk_configs); k is less in the last chunk.
  """
  kind, stop = _kind(graph), start + config_features.shape[0]
  chunk = chunk_from_arrays(
      kind, config_features, start, graph.config_runtime[start:stop],
      graph.config_runtime_normalizers[start:stop] if kind == "tile" else None)
  # Empty ops and data flow, and `configures`, which `join` derives from the structure.
  node_sets, edge_sets = _empty_pieces(
      kind, STRUCTURE_NODE_SETS[kind], STRUCTURE_EDGE_SETS[kind] + (("configures",) if kind == "layout" else ()))
  return tfgnn.GraphTensor.from_pieces(context=_context(graph, configs_in_chunk),
                                       node_sets={**node_sets, **chunk.node_sets},
                                       edge_sets={**edge_sets, **chunk.edge_sets})


def serialize(graph_tensor: tfgnn.GraphTensor) -> bytes:
  """Deterministic tf.Example bytes (map fields in sorted order), so conversions are reproducible:
  tfgnn.write_example's, written from numpy at once (example_encoding)."""
  return example_encoding.example_bytes(graph_tensor)


def parse(kind: str, serialized: tf.Tensor) -> tfgnn.GraphTensor:
  """Parses one serialized record (scalar string) into a GraphTensor of the collection's schema."""
  return tfgnn.parse_single_example(graph_spec(kind), serialized)


def slot_ops(config_slot: tf.Tensor, num_slots: tf.Tensor) -> tf.Tensor:
  """(num_slots,) int64 the op of every config slot, in slot order, from the ops' `config_slot`
  (-1: none). Sized from num_slots, not by a mask of the data, so that XLA (a compiled serving
  function) sees a static size."""
  return tf.math.unsorted_segment_max(tf.range(tf.shape(config_slot, tf.int64)[0], dtype=tf.int64),
                                      tf.cast(config_slot, tf.int64), tf.cast(num_slots, tf.int64))


def join(kind: str, structure: tfgnn.GraphTensor, chunk: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """One graph with one chunk of configs: ops and data flow from `structure`, configs from `chunk`.

  For layout, `configures` edges link node_config i * nc + j to the op whose config_slot is j.
  Works eagerly and inside tf.data; shapes are dynamic.
  """
  node_sets = {name: structure.node_sets[name] for name in STRUCTURE_NODE_SETS[kind]}
  edge_sets = {name: structure.edge_sets[name] for name in STRUCTURE_EDGE_SETS[kind]}
  for name in CONFIG_NODE_SETS[kind]:
    node_sets[name] = chunk.node_sets[name]
  if kind == "layout":
    edge_sets["belongs_to"] = chunk.edge_sets["belongs_to"]
    slots = structure.node_sets["op"]["config_slot"]
    num_configs = chunk.node_sets["config"].total_size
    num_slots = tf.shape(chunk.node_sets["node_config"]["feat"], tf.int64)[0] // tf.maximum(
        tf.cast(num_configs, tf.int64), 1)
    configurable_ops = slot_ops(slots, num_slots)
    targets = tf.tile(configurable_ops, tf.reshape(tf.cast(num_configs, tf.int32), [1]))
    edge_sets["configures"] = tfgnn.EdgeSet.from_fields(
        sizes=tf.shape(targets, tf.int64)[:1],
        adjacency=tfgnn.Adjacency.from_indices(
            ("node_config", tf.range(tf.shape(targets, tf.int64)[0], dtype=tf.int64)), ("op", targets)))
  context = tfgnn.Context.from_fields(features=structure.context.features, sizes=structure.context.sizes)
  return tfgnn.GraphTensor.from_pieces(context=context, node_sets=node_sets, edge_sets=edge_sets)


def structure_from_arrays(kind: str, node_feat: tf.Tensor, node_opcode: tf.Tensor, edge_index: tf.Tensor,
                          node_config_ids: Optional[tf.Tensor] = None, node_splits: Optional[tf.Tensor] = None,
                          context: Optional[tfgnn.Context] = None) -> tfgnn.GraphTensor:
  """A structure GraphTensor (ops and data flow, empty config sets) from raw arrays, in TF ops only.

  Shapes: node_feat (n, 140); node_opcode (n,); edge_index (m, 2) rows [consumer, producer];
  layout: node_config_ids (nc,), node_splits (1, k) (none when not given). Without `context` the
  graph is anonymous, as for serving. Traceable into a SavedModel.
  """
  node_feat = tf.convert_to_tensor(node_feat, tf.float32)
  edge_index = tf.cast(edge_index, tf.int64)
  num_nodes = tf.shape(node_feat, tf.int64)[:1]
  op_features = {"feat": node_feat, "opcode": tf.cast(node_opcode, tf.int64)}
  node_sets, edge_sets = _empty_pieces(kind, CONFIG_NODE_SETS[kind], CONFIG_EDGE_SETS[kind])
  if kind == "layout":
    ids = tf.cast(node_config_ids, tf.int64)
    op_features["config_slot"] = tf.tensor_scatter_nd_update(
        -tf.ones(num_nodes, tf.int64), ids[:, None], tf.range(tf.shape(ids, tf.int64)[0]))
    offsets = tf.zeros([0], tf.int64) if node_splits is None else tf.reshape(tf.cast(node_splits, tf.int64), [-1])
    node_sets["node_split"] = tfgnn.NodeSet.from_fields(sizes=tf.shape(offsets, tf.int64)[:1],
                                                        features={"offset": offsets})
  node_sets["op"] = tfgnn.NodeSet.from_fields(sizes=num_nodes, features=op_features)
  edge_sets["feeds"] = tfgnn.EdgeSet.from_fields(
      sizes=tf.shape(edge_index, tf.int64)[:1],
      adjacency=tfgnn.Adjacency.from_indices(("op", edge_index[:, 1]), ("op", edge_index[:, 0])))
  if context is None:
    context = tfgnn.Context.from_fields(features={
        "graph_id": tf.constant([""]), "collection": tf.constant([kind]),
        "num_configs": tf.zeros([1], tf.int64), "num_chunks": tf.ones([1], tf.int64)}, sizes=tf.constant([1]))
  return tfgnn.GraphTensor.from_pieces(context=context, node_sets=node_sets, edge_sets=edge_sets)


def chunk_from_arrays(kind: str, config_features: tf.Tensor, first_index=0, runtimes: Optional[tf.Tensor] = None,
                      normalizers: Optional[tf.Tensor] = None) -> tfgnn.GraphTensor:
  """A chunk GraphTensor (configs only, as `join` takes them) from raw config features.

  config_features: tile config_feat rows (k, 24) or layout node_config_feat rows (k, nc, 18);
  first_index: the config index of the first row; runtimes (k,) and, for tile, normalizers (k,)
  where known (zero and one otherwise, as in the test split).
  """
  features = tf.convert_to_tensor(config_features, tf.float32)
  num_configs = tf.shape(features, tf.int64)[:1]
  config_features = {"config_index": tf.cast(first_index, tf.int64) + tf.range(num_configs[0]),
                     "runtime": tf.zeros(num_configs, tf.int64) if runtimes is None else tf.cast(runtimes, tf.int64)}
  node_sets, edge_sets = {}, {}
  if kind == "tile":
    config_features.update(feat=features, normalizer=tf.ones(num_configs, tf.int64) if normalizers is None
                           else tf.cast(normalizers, tf.int64))
  else:
    num_slots = tf.shape(features, tf.int64)[1]
    total = num_configs * num_slots
    node_sets["node_config"] = tfgnn.NodeSet.from_fields(
        sizes=total, features={"feat": tf.reshape(features, [-1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH])})
    sources = tf.range(total[0])
    edge_sets["belongs_to"] = tfgnn.EdgeSet.from_fields(
        sizes=total, adjacency=tfgnn.Adjacency.from_indices(
            ("node_config", sources), ("config", sources // tf.maximum(num_slots, 1))))
  node_sets["config"] = tfgnn.NodeSet.from_fields(sizes=num_configs, features=config_features)
  return tfgnn.GraphTensor.from_pieces(node_sets=node_sets, edge_sets=edge_sets)


def graph_tensor_from_arrays(kind: str, node_feat: tf.Tensor, node_opcode: tf.Tensor, edge_index: tf.Tensor,
                             config_feat: Optional[tf.Tensor] = None, node_config_ids: Optional[tf.Tensor] = None,
                             node_config_feat: Optional[tf.Tensor] = None) -> tfgnn.GraphTensor:
  """The GraphTensor `join` would give for raw TpuGraphs arrays with all their configs.

  This is what a served model receives: callers pass the npz arrays (tile: config_feat (c, 24);
  layout: node_config_ids (nc,) and node_config_feat (c, nc, 18)). TF ops only.
  """
  structure = structure_from_arrays(kind, node_feat, node_opcode, edge_index, node_config_ids)
  return join(kind, structure, chunk_from_arrays(kind, config_feat if kind == "tile" else node_config_feat))


def config_chunks(graph: graphs.Graph, configs_per_chunk: int) -> Iterable[tuple[int, np.ndarray]]:
  """(start, rows) over the graph's config-feature array, streamed when it lives on disk."""
  features = graph.config_feat if isinstance(graph, graphs.TileGraph) else graph.node_config_feat
  if hasattr(features, "iter_chunks"):
    start = 0
    for rows in features.iter_chunks(configs_per_chunk):
      yield start, rows
      start += rows.shape[0]
  else:
    for start in range(0, features.shape[0], configs_per_chunk):
      yield start, features[start:start + configs_per_chunk]


def graph_records(graph: graphs.Graph, configs_per_chunk: int = DEFAULT_CONFIGS_PER_CHUNK,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> tuple[bytes, Iterable[bytes]]:
  """The structure record and a lazy iterator of chunk records for one graph."""
  configs_in_chunk = chunk_configs(graph, configs_per_chunk, chunk_bytes)
  structure = serialize(structure_graph_tensor(graph, configs_in_chunk))
  chunks = (serialize(config_chunk_graph_tensor(graph, start, rows, configs_in_chunk))
            for start, rows in config_chunks(graph, configs_in_chunk))
  return structure, chunks


def graph_from_records(kind: str, structure: bytes, chunks: Iterable[bytes],
                       split: Optional[str] = None) -> graphs.Graph:
  """Rebuilds the npz arrays of one graph from its records (inverse of `graph_records`)."""
  structure_tensor = parse(kind, tf.constant(structure))
  op = structure_tensor.node_sets["op"]
  context = structure_tensor.context
  graph_id = context["graph_id"][0].numpy().decode()
  collection = context["collection"][0].numpy().decode()
  feeds = structure_tensor.edge_sets["feeds"].adjacency
  arrays = {
      "node_feat": op["feat"].numpy(),
      "node_opcode": op["opcode"].numpy().astype(np.uint8),
      "edge_index": np.stack([feeds.target.numpy(), feeds.source.numpy()], axis=1).reshape(-1, 2),
  }
  chunk_tensors = [parse(kind, tf.constant(chunk)) for chunk in chunks]
  configs = [chunk.node_sets["config"] for chunk in chunk_tensors]
  arrays["config_runtime"] = np.concatenate([c["runtime"].numpy() for c in configs])
  if kind == "tile":
    arrays["config_feat"] = np.concatenate([c["feat"].numpy() for c in configs])
    arrays["config_runtime_normalizers"] = np.concatenate([c["normalizer"].numpy() for c in configs])
  else:
    slots = op["config_slot"].numpy()
    arrays["node_config_ids"] = np.argsort(np.where(slots >= 0, slots, np.iinfo(np.int64).max))[:(slots >= 0).sum()]
    num_slots = arrays["node_config_ids"].shape[0]
    arrays["node_config_feat"] = np.concatenate(
        [chunk.node_sets["node_config"]["feat"].numpy().reshape(-1, num_slots, graphs.LAYOUT_CONFIG_FEATURE_WIDTH)
         for chunk in chunk_tensors])
    arrays["node_splits"] = structure_tensor.node_sets["node_split"]["offset"].numpy().reshape(1, -1)
  return graphs.validate_graph(f"records of {graph_id}", graph_id, collection, split, arrays)
