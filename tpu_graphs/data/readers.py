"""tf.data readers of converted records: GraphTensors of one graph with a chunk of its configs.

Each shard's structure records are repeated once per chunk of their graph and zipped with the
shard's config-chunk records (both are in graph order), then joined. Nothing but tf.data ops, so
the pipeline runs in the input worker under any distribution strategy, and memory holds one chunk
per element whatever the number of configs per graph. An optional `structure_transform`
(GraphTensor -> GraphTensor of the same schema, e.g. layout pruning) runs once per graph on its
structure record, before the structure is repeated for its chunks.

* `evaluation_dataset`: every config of every graph, chunk by chunk, in file order.
* `training_dataset`: per chunk, `configs_per_graph` configs sampled without replacement; fully
  determined by `seed`, so an epoch can be replayed exactly (kill-and-resume training).

Training reads shards interleaved, several at a time (evaluation in file order), and records are parsed, transformed and sampled by
parallel maps (tf.data's AUTOTUNE picks the parallelism); every parallel stage is deterministic,
so the elements come in the same order whatever the parallelism (same seed, same batches).
"""

from __future__ import annotations

import json
from typing import Callable, Optional

import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import convert, errors, graphs, records, storage


def read_manifest(records_dir) -> dict:
  """The manifest.json of one converted collection and split, refused (errors.InputError) if it is
  damaged or its shard entries were edited since conversion: readers believe its config and chunk
  counts, so a wrong count would silently drop or misalign configs."""
  path = storage.join(records_dir, "manifest.json")
  try:
    manifest = json.loads(storage.read_text(path))
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: no manifest; convert the npz files first (baselines/convert.py)") from None
  except (OSError, ValueError, tf.errors.OpError) as error:
    raise errors.InputError(f"{path}: damaged ({type(error).__name__}: {error}); convert again "
                            "(baselines/convert.py)") from None
  shards = manifest.get("shards") if isinstance(manifest, dict) else None
  if not isinstance(shards, list) or not all(isinstance(shard, dict) for shard in shards):
    raise errors.InputError(f"{path}: damaged (no list of shards); convert again (baselines/convert.py)")
  for index, shard in enumerate(shards):
    if shard.get("content_sha256") != convert.shard_content_sha256(shard):
      raise errors.InputError(f"{path}: shard {index} was edited since it was converted (its content_sha256 "
                              "differs); convert again (baselines/convert.py)")
  return manifest


StructureTransform = Callable[[tfgnn.GraphTensor], tfgnn.GraphTensor]
# Every parallel stage: as many calls as tf.data finds useful, results in input order.
PARALLEL = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
# tf.data traces a function it is given through autograph, which rewrites its source and that of all
# it calls (TF-GNN's GraphTensor code) into graph control flow. Ours hold no Python control flow on
# tensors, and that rewriting was about a third of a small training run's CPU time, so every
# function of the pipelines is traced as written.
without_autograph = tf.autograph.experimental.do_not_convert


def parallel_map(dataset: tf.data.Dataset, function: Callable) -> tf.data.Dataset:
  """dataset.map(function) with PARALLEL calls, traced without autograph."""
  return dataset.map(without_autograph(function), **PARALLEL)
# Shards read at a time: their elements alternate, one from each in turn.
INTERLEAVED_SHARDS = 4


def _shard_dataset(kind: str, structure_file: str, configs_file: str,
                   structure_transform: Optional[StructureTransform] = None) -> tf.data.Dataset:
  """(structure, chunk) GraphTensor pairs of one shard, in order."""
  parse = lambda serialized: records.parse(kind, serialized)
  structures = parallel_map(tf.data.TFRecordDataset(structure_file, convert.RECORD_COMPRESSION), parse)
  if structure_transform is not None:  # once per graph, also when the pairs are repeated
    structures = parallel_map(structures, structure_transform).cache()
  structures = structures.flat_map(
      without_autograph(lambda g: tf.data.Dataset.from_tensors(g).repeat(g.context["num_chunks"][0])))
  chunks = parallel_map(tf.data.TFRecordDataset(configs_file, convert.RECORD_COMPRESSION), parse)
  return tf.data.Dataset.zip((structures, chunks))


def _pairs(records_dir, shuffle_seed: Optional[int] = None, structure_transform: Optional[StructureTransform] = None,
           cycle_length: int = 1) -> tuple[str, tf.data.Dataset]:
  """(kind, (structure, chunk) pairs of every shard), `cycle_length` shards read at a time."""
  manifest = read_manifest(records_dir)
  kind = graphs.collection_kind(manifest["collection"])
  shards = [(storage.join(records_dir, s["structure_file"]), storage.join(records_dir, s["configs_file"]))
            for s in manifest["shards"]]
  if shuffle_seed is not None:
    order = tf.random.experimental.stateless_shuffle(tf.range(len(shards)), seed=[shuffle_seed, 0]).numpy()
    shards = [shards[i] for i in order]
  if cycle_length == 1 or len(shards) == 1:  # in file order: no interleave to pay for
    datasets = [_shard_dataset(kind, s, c, structure_transform) for s, c in shards]
    pairs = datasets[0]
    for dataset in datasets[1:]:
      pairs = pairs.concatenate(dataset)
    return kind, pairs
  structure_files, configs_files = (list(files) for files in zip(*shards))
  pairs = tf.data.Dataset.from_tensor_slices((structure_files, configs_files)).interleave(
      without_autograph(lambda structure_file, configs_file: _shard_dataset(kind, structure_file, configs_file,
                                                                            structure_transform)),
      cycle_length=cycle_length, block_length=1, **PARALLEL)
  return kind, pairs


def evaluation_dataset(records_dir, structure_transform: Optional[StructureTransform] = None) -> tf.data.Dataset:
  """Scalar GraphTensors: each graph once per chunk, with all of that chunk's configs."""
  kind, pairs = _pairs(records_dir, structure_transform=structure_transform)
  return parallel_map(pairs, lambda structure, chunk: records.join(kind, structure, chunk))


def sample_chunk(kind: str, chunk: tfgnn.GraphTensor, count: int, seed: tf.Tensor) -> tfgnn.GraphTensor:
  """The chunk restricted to `count` configs drawn without replacement (all, if fewer).

  Args:
    kind: 'tile' or 'layout'.
    chunk: a chunk record's GraphTensor (configs only).
    count: configs to keep, k.
    seed: int tensor of shape (2,) for stateless sampling.
  """
  configs = chunk.node_sets["config"]
  num_configs = tf.cast(configs.total_size, tf.int32)
  order = tf.argsort(tf.random.stateless_uniform([num_configs], seed=seed))
  picked = order[:tf.minimum(count, num_configs)]
  kept = tf.shape(picked, tf.int64)[:1]
  node_sets = {name: chunk.node_sets[name] for name in records.STRUCTURE_NODE_SETS[kind]}
  edge_sets = {name: chunk.edge_sets[name] for name in records.STRUCTURE_EDGE_SETS[kind]}
  node_sets["config"] = tfgnn.NodeSet.from_fields(
      sizes=kept, features={name: tf.gather(value, picked) for name, value in configs.features.items()})
  if kind == "layout":
    feat = chunk.node_sets["node_config"]["feat"]
    slots = tf.shape(feat)[0] // tf.maximum(num_configs, 1)
    picked_feat = tf.gather(tf.reshape(feat, [num_configs, slots, graphs.LAYOUT_CONFIG_FEATURE_WIDTH]), picked)
    picked_feat = tf.reshape(picked_feat, [-1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH])
    total = tf.shape(picked_feat, tf.int64)[:1]
    node_sets["node_config"] = tfgnn.NodeSet.from_fields(sizes=total, features={"feat": picked_feat})
    sources = tf.range(total[0], dtype=tf.int64)
    edge_sets["belongs_to"] = tfgnn.EdgeSet.from_fields(
        sizes=total, adjacency=tfgnn.Adjacency.from_indices(
            ("node_config", sources), ("config", sources // tf.cast(tf.maximum(slots, 1), tf.int64))))
    edge_sets["configures"] = chunk.edge_sets["configures"]
  return tfgnn.GraphTensor.from_pieces(context=chunk.context, node_sets=node_sets, edge_sets=edge_sets)


def training_dataset(records_dir, configs_per_graph: int, seed: int, shuffle_buffer: int = 64,
                     structure_transform: Optional[StructureTransform] = None, passes: int = 1) -> tf.data.Dataset:
  """Scalar GraphTensors, one per chunk and pass, each with `configs_per_graph` sampled configs
  (a new sample in every pass), shuffled.

  The same seed gives the same elements in the same order; vary it per epoch.
  """
  kind, pairs = _pairs(records_dir, shuffle_seed=seed, structure_transform=structure_transform,
                       cycle_length=INTERLEAVED_SHARDS)
  pairs = pairs.repeat(passes).enumerate()

  def sample_and_join(index, pair):
    structure, chunk = pair
    return records.join(kind, structure, sample_chunk(kind, chunk, configs_per_graph,
                                                      tf.stack([tf.constant(seed, tf.int64), index])))

  dataset = parallel_map(pairs, sample_and_join)
  return dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=False)
