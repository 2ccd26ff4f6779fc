"""Small tile:xla npz trees whose runtimes are a known function of the config features.

Until generated data is embedded, training tests need tile graphs a model can learn from: the
runtime of config f of a kernel is scale * prod_j f_j^w_j for three fixed feature columns, so the
best configs follow from the features and a random ranker does measurably worse.
"""

import pathlib

import numpy as np

from tpu_graphs.data import convert, graphs, npz

RUNTIME_EXPONENTS = {0: 0.8, 3: -0.5, 7: 0.3}


def tile_graph(rng: np.random.Generator, graph_id: str, split: str, num_configs: int) -> graphs.TileGraph:
  """A random kernel: a chain of 3-9 ops plus skip edges, `num_configs` configs."""
  num_nodes = int(rng.integers(3, 10))
  producers = np.arange(num_nodes - 1)
  edges = [np.stack([producers + 1, producers], axis=1)]  # rows [consumer, producer]
  if num_nodes > 3:
    edges.append(np.array([[num_nodes - 1, 0]]))
  config_feat = rng.integers(1, 65, size=(num_configs, graphs.TILE_CONFIG_FEATURE_WIDTH)).astype(np.float32)
  scale = float(rng.uniform(1e3, 1e5))
  runtime = scale * np.prod([config_feat[:, j] ** w for j, w in RUNTIME_EXPONENTS.items()], axis=0)
  test = split == "test"
  return graphs.TileGraph(
      graph_id=graph_id, collection="tile:xla", split=split,
      node_feat=rng.normal(size=(num_nodes, graphs.NODE_FEATURE_WIDTH)).astype(np.float32),
      node_opcode=rng.integers(1, 120, size=num_nodes).astype(np.uint8),
      edge_index=np.concatenate(edges).astype(np.int64),
      config_feat=config_feat,
      config_runtime=np.zeros(num_configs, np.int64) if test else np.maximum(runtime, 1).astype(np.int64),
      config_runtime_normalizers=np.ones(num_configs, np.int64) if test else np.full(num_configs, 7, np.int64))


def write_tile_tree(root, graphs_per_split: dict, num_configs: int = 24, seed: int = 0) -> pathlib.Path:
  """Writes <root>/npz/tile/xla/<split>/<id>.npz; returns <root>/npz."""
  rng = np.random.default_rng(seed)
  npz_root = pathlib.Path(root) / "npz"
  for split, count in graphs_per_split.items():
    directory = npz_root / "tile" / "xla" / split
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(count):
      graph_id = f"{split}_kernel_{index:03d}"
      npz.write_graph(directory / f"{graph_id}.npz", tile_graph(rng, graph_id, split, num_configs))
  return npz_root


def tile_records(root, graphs_per_split: dict, num_configs: int = 24, seed: int = 0) -> pathlib.Path:
  """Converted records of a tree from write_tile_tree; returns <root>/records/tile/xla."""
  npz_root = write_tile_tree(root, graphs_per_split, num_configs, seed)
  convert.convert_directory(npz_root, pathlib.Path(root) / "records", progress=False)
  return pathlib.Path(root) / "records" / "tile" / "xla"


def tile_graph_tensors(root, count: int, num_configs: int = 6, seed: int = 0) -> list:
  """`count` scalar tile GraphTensors (all configs each), read back through the records reader."""
  from tpu_graphs.data import readers  # TensorFlow only for the tests that need graphs
  records = tile_records(root, {"valid": count}, num_configs, seed)
  return list(readers.evaluation_dataset(records / "valid"))


def merged_batch(graphs: list):
  """One GraphTensor holding `graphs` as its components, as the trainer batches them."""
  import tensorflow as tf
  dataset = tf.data.Dataset.from_generator(lambda: iter(graphs), output_signature=graphs[0].spec.relax(num_nodes=True, num_edges=True))
  return next(iter(dataset.batch(len(graphs)).map(lambda g: g.merge_batch_to_components())))
