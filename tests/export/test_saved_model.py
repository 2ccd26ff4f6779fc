"""The serving SavedModel: written by the trainer, same scores as the in-memory model, served by
plain TensorFlow (a fresh process without tpu_graphs or TF-GNN, and saved_model_cli); a finished run
exported again without its data."""

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import sample_data
import tile_test_data
from tpu_graphs.data import graphs, locations, npz, records
from tpu_graphs.export import run_export, saved_model
from tpu_graphs.export.aot import layout_shapes, signatures, tile_shapes
from tpu_graphs.models import layout_model, tile_model
from tpu_graphs.train import calibration, experiments, run_directory, run_experiment, scoring, tasks, trainer

REAL_TILE_FILES = ("npz/tile/xla/test/0a3585c3e686065389227fa374175e48.npz",
                   "npz/tile/xla/test/0ac539372cc77cc6791794b369b984e1.npz",
                   "npz/tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz")
REAL_LAYOUT_FILE = "npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"  # 3,163 ops, 62 configurable
SAVED_MODEL_CLI = pathlib.Path(sys.executable).parent / "saved_model_cli"


@pytest.fixture(scope="module")
def tile_run(tmp_path_factory):
  """A 2-epoch tile run with the serving exporter: (run directory, the trained in-memory scorer)."""
  root = tmp_path_factory.mktemp("tile")
  records_dir = tile_test_data.tile_records(root, {"train": 8, "valid": 4})
  built = []

  def build(spec):
    built.append(tile_model.build_tile_model(spec, "late", "sage", units=16, num_layers=2))
    return built[-1]

  config = trainer.TrainingConfig(train_dir=str(records_dir / "train"), valid_dir=str(records_dir / "valid"),
                                  out_dir=str(root / "run"), epochs=2, batch_size=4, configs_per_graph=8,
                                  learning_rate=3e-3, verbose=0)
  trainer.run(tasks.TileTask(), build, config, exporters=[run_export.export_to_run_directory])
  return root / "run", built[0]


@pytest.fixture(scope="module")
def tile_export(tile_run):
  """The tile run's export (export_to_run_directory's), loaded once: its signatures keep no state
  between calls, so the tests share it. A fresh process loads it too (below)."""
  return tf.saved_model.load(str(tile_run[0] / saved_model.EXPORT_DIR_NAME))


@pytest.fixture(scope="module")
def tile_static_export(tile_run, tmp_path_factory):
  """The tile run's trained scorer exported with the static signatures, loaded."""
  export_dir = tmp_path_factory.mktemp("tile_static") / "export"
  saved_model.export(tile_run[1], "tile", export_dir, static_functions=signatures.static_functions)
  return tf.saved_model.load(str(export_dir))


def _joined_graphs(kind: str, graph: graphs.Graph) -> list:
  """The graph through the records path (structure + chunk records, parsed and joined)."""
  structure, chunks = records.graph_records(graph, configs_per_chunk=400)
  structure = records.parse(kind, tf.constant(structure))
  return [records.join(kind, structure, records.parse(kind, tf.constant(chunk))) for chunk in chunks]


def _served_scores(loaded, graph: graphs.TileGraph) -> np.ndarray:
  serve = loaded.signatures[saved_model.PLAIN_SIGNATURE]
  return serve(node_feat=tf.constant(graph.node_feat), node_opcode=tf.constant(graph.node_opcode),
               edge_index=tf.constant(graph.edge_index), config_feat=tf.constant(graph.config_feat))["scores"].numpy()


def test_trainer_exports_both_signatures_into_the_run_directory_and_no_static_ones(tile_run, tile_export,
                                                                                  tile_static_export):
  run_dir, _ = tile_run
  loaded = tile_export
  assert set(loaded.signatures) == {saved_model.PLAIN_SIGNATURE, saved_model.EXAMPLES_SIGNATURE}
  assert set(tile_static_export.signatures) == {saved_model.PLAIN_SIGNATURE, saved_model.EXAMPLES_SIGNATURE,
                                                *(bucket.signature_name for bucket in tile_shapes.SPLIT_TILE_BUCKETS),
                                                tile_shapes.SPLIT_TILE_BUCKETS[0].configs_signature_name,
                                                tile_shapes.SPLIT_TILE_BUCKETS[0].join_signature_name}
  inputs = loaded.signatures[saved_model.PLAIN_SIGNATURE].structured_input_signature[1]
  assert {name: spec.dtype for name, spec in inputs.items()} == {
      "node_feat": tf.float32, "node_opcode": tf.uint8, "edge_index": tf.int64, "config_feat": tf.float32}
  assert not list(run_dir.glob(".export.*"))  # written beside, then swapped in


def test_trainer_exports_the_calibration_of_its_final_scorer_on_the_validation_split(tile_run):
  run_dir, scorer = tile_run
  valid_dir = json.loads((run_dir / "config.json").read_text())["valid_dir"]
  expected = calibration.fit(scoring.score_records(tasks.TileTask(), scorer, valid_dir), seed=0)
  exported = calibration.read(run_dir / saved_model.EXPORT_DIR_NAME)
  assert exported is not None and exported.graphs == 4
  np.testing.assert_allclose(exported.knot_values, expected.knot_values, rtol=1e-5)
  np.testing.assert_allclose(exported.half_widths, expected.half_widths, rtol=1e-5)


def test_static_bucket_signatures_score_as_the_plain_signature_whatever_the_filler_rows_hold(tile_static_export):
  loaded = tile_static_export
  rng = np.random.default_rng(0)
  for relative in REAL_TILE_FILES:
    graph = npz.read_graph(sample_data.require_sample(relative))
    configs = min(graph.config_feat.shape[0], tile_shapes.CONFIGS_PER_CALL)
    nodes, edges = graph.node_feat.shape[0], graph.edge_index.shape[0]
    bucket = next(b for b in tile_shapes.SPLIT_TILE_BUCKETS if nodes <= b.nodes and edges <= b.edges)
    padded = {  # filler rows of noise and edges naming real ops: the real component must not read them
        "node_feat": rng.normal(size=[bucket.nodes, graphs.NODE_FEATURE_WIDTH]).astype(np.float32) * 100,
        "node_opcode": rng.integers(0, 256, [bucket.nodes]).astype(np.uint8),
        "edge_index": rng.integers(0, nodes, [bucket.edges, 2]),
        "config_feat": rng.normal(size=[bucket.configs, graphs.TILE_CONFIG_FEATURE_WIDTH]).astype(np.float32)}
    for name, rows in (("node_feat", graph.node_feat), ("node_opcode", graph.node_opcode),
                       ("edge_index", graph.edge_index), ("config_feat", graph.config_feat[:configs])):
      padded[name][:len(rows)] = rows
    kernel_part = loaded.signatures[bucket.signature_name](
        node_feat=padded["node_feat"], node_opcode=padded["node_opcode"], edge_index=padded["edge_index"],
        num_nodes=np.int32(nodes), num_edges=np.int32(edges))["kernel_part"]
    config_part = loaded.signatures[bucket.configs_signature_name](config_feat=padded["config_feat"])["config_part"]
    static = loaded.signatures[bucket.join_signature_name](
        kernel_part=kernel_part, config_part=config_part, num_configs=np.int32(configs))["scores"]
    plain = loaded.signatures[saved_model.PLAIN_SIGNATURE](
        node_feat=graph.node_feat, node_opcode=graph.node_opcode, edge_index=graph.edge_index,
        config_feat=graph.config_feat[:configs])["scores"]
    np.testing.assert_allclose(static.numpy()[:configs], plain.numpy(), rtol=1e-5, atol=1e-6)


def test_plain_signature_equals_in_memory_model_on_real_tile_files(tile_run, tile_export):
  _, scorer = tile_run
  for relative in REAL_TILE_FILES:
    graph = npz.read_graph(sample_data.require_sample(relative))
    expected = np.concatenate([scorer(joined.with_indices_dtype(tf.int32)).numpy()
                               for joined in _joined_graphs("tile", graph)])
    served = _served_scores(tile_export, graph)
    assert served.shape == (graph.num_configs,)
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-5)
    assert np.ptp(served) > 0  # the configs are told apart


def _plain_arrays(graph: graphs.Graph) -> list:
  arrays = [graph.node_feat, graph.node_opcode, graph.edge_index]
  arrays += [graph.config_feat] if isinstance(graph, graphs.TileGraph) else [graph.node_config_ids,
                                                                              graph.node_config_feat]
  return [tf.constant(array) for array in arrays]


def test_plain_scoring_function_compiles_under_xla_to_the_same_scores(tile_export):
  loaded = tile_export
  compiled = tf.function(loaded.score, jit_compile=True)  # as a compiler would AOT-compile it
  for relative in REAL_TILE_FILES:  # 25 to 2,951 configs: no full chunk, and several
    arrays = _plain_arrays(npz.read_graph(sample_data.require_sample(relative)))
    np.testing.assert_allclose(compiled(*arrays)["scores"].numpy(), loaded.score(*arrays)["scores"].numpy(),
                               rtol=1e-5, atol=1e-5)


def _first_configs(graph: graphs.LayoutGraph, num_configs: int) -> graphs.LayoutGraph:
  return dataclasses.replace(graph, node_config_feat=graph.node_config_feat[:num_configs],
                             config_runtime=graph.config_runtime[:num_configs])


def _small_layout_scorer(path, num_configs: int, **model_settings):
  """The layout file's first `num_configs` configs and an untrained 16-unit, 2-layer model for it
  (model_settings: more of build_layout_model's arguments)."""
  graph = _first_configs(npz.read_graph(path), num_configs)
  example = records.graph_tensor_from_arrays("layout", graph.node_feat, graph.node_opcode, graph.edge_index,
                                             node_config_ids=graph.node_config_ids,
                                             node_config_feat=graph.node_config_feat[:2])
  scorer = layout_model.build_layout_model(
      example.with_indices_dtype(tf.int32).spec.relax(num_components=True, num_nodes=True, num_edges=True),
      units=16, num_layers=2, **model_settings)
  return graph, scorer


@pytest.fixture(scope="module")
def layout_export(tmp_path_factory):
  """A small layout file's first 300 configs and the export of an untrained model for it without
  pruning (export_to_run_directory's), loaded."""
  graph, scorer = _small_layout_scorer(sorted((locations.EMBEDDED_NPZ / "layout/nlp/default/valid").glob("*.npz"))[0], 300)
  run_dir = tmp_path_factory.mktemp("layout_run")
  run_export.export_to_run_directory(scorer, tasks.LayoutTask(), run_dir)  # no pruning: its sizes depend on data
  return graph, tf.saved_model.load(str(run_dir / saved_model.EXPORT_DIR_NAME))


def test_layout_scoring_function_without_pruning_compiles_under_xla(layout_export):
  graph, loaded = layout_export
  arrays = _plain_arrays(graph)
  served = loaded.score(*arrays)["scores"].numpy()
  np.testing.assert_allclose(tf.function(loaded.score, jit_compile=True)(*arrays)["scores"].numpy(), served,
                             rtol=1e-4, atol=1e-4)
  assert served.shape == (300,) and np.ptp(served) > 0


def test_examples_signature_scores_serialized_graphs_in_order(tile_export):
  loaded = tile_export
  tile_graphs = [npz.read_graph(sample_data.require_sample(relative)) for relative in REAL_TILE_FILES[1:]]
  examples = [records.serialize(joined) for graph in tile_graphs for joined in _joined_graphs("tile", graph)]
  served = loaded.signatures[saved_model.EXAMPLES_SIGNATURE](examples=tf.constant(examples))["scores"].numpy()
  expected = np.concatenate([_served_scores(loaded, g) for g in tile_graphs])
  np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-5)


def test_fresh_process_importing_only_tensorflow_serves_the_model(tile_run, tile_export):
  run_dir, _ = tile_run
  path = sample_data.require_sample(REAL_TILE_FILES[0])
  program = f"""
import sys
import numpy as np
import tensorflow as tf
arrays = np.load({str(path)!r})
served = tf.saved_model.load({str(run_dir / saved_model.EXPORT_DIR_NAME)!r})
scores = served.signatures["serving_default"](**{{name: tf.constant(arrays[name]) for name in
    ("node_feat", "node_opcode", "edge_index", "config_feat")}})["scores"].numpy()
foreign = sorted(m for m in sys.modules if m.split(".")[0] in ("tpu_graphs", "tensorflow_gnn"))
assert not foreign, foreign
np.save(sys.argv[1], scores)
"""
  output = run_dir.parent / "fresh_scores.npy"
  environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  environment.pop("PYTHONPATH", None)
  subprocess.run([sys.executable, "-c", program, str(output)], check=True, cwd="/", env=environment)
  np.testing.assert_array_equal(np.load(output), _served_scores(tile_export, npz.read_graph(path)))


def test_saved_model_cli_runs_the_plain_signature_on_a_real_file(tile_run, tile_export, tmp_path):
  if not SAVED_MODEL_CLI.exists():
    pytest.skip(f"{SAVED_MODEL_CLI} not installed beside the Python interpreter")
  run_dir, _ = tile_run
  path = sample_data.require_sample(REAL_TILE_FILES[1])
  inputs = ";".join(f"{name}={path}[{name}]" for name in saved_model.plain_input_names("tile"))
  subprocess.run([str(SAVED_MODEL_CLI), "run", "--dir", str(run_dir / saved_model.EXPORT_DIR_NAME),
                  "--tag_set", "serve", "--signature_def", "serving_default", "--inputs", inputs,
                  "--outdir", str(tmp_path)], check=True, capture_output=True)
  np.testing.assert_allclose(np.load(tmp_path / "scores.npy"),
                             _served_scores(tile_export, npz.read_graph(path)), rtol=1e-6)


def test_edge_index_out_of_range_is_rejected_naming_the_input(tile_export):
  serve = tile_export.signatures[saved_model.PLAIN_SIGNATURE]
  with pytest.raises(tf.errors.InvalidArgumentError, match="edge_index"):
    serve(node_feat=tf.zeros([2, graphs.NODE_FEATURE_WIDTH]), node_opcode=tf.constant([1, 2], tf.uint8),
          edge_index=tf.constant([[1, 5]], tf.int64), config_feat=tf.ones([3, graphs.TILE_CONFIG_FEATURE_WIDTH]))


def _tile_arrays(**replaced) -> dict:
  arrays = {"node_feat": np.ones([3, graphs.NODE_FEATURE_WIDTH], np.float32), "node_opcode": np.array([1, 2, 3], np.uint8),
            "edge_index": np.array([[1, 0], [2, 1]], np.int64),
            "config_feat": np.ones([4, graphs.TILE_CONFIG_FEATURE_WIDTH], np.float32)}
  return {name: tf.constant(value) for name, value in {**arrays, **replaced}.items()}


@pytest.mark.parametrize("replaced, message", [
    ({"node_feat": np.full([3, 140], np.nan, np.float32)}, "node_feat holds NaN or infinite values"),
    ({"config_feat": np.full([4, 24], np.inf, np.float32)}, "config_feat holds NaN or infinite values"),
    ({"node_feat": np.zeros([0, 140], np.float32), "node_opcode": np.zeros([0], np.uint8),
      "edge_index": np.zeros([0, 2], np.int64)}, "node_feat has no rows: a graph needs at least one node"),
    ({"node_feat": np.ones([3, 139], np.float32)}, "node_feat must have 140 features per row"),
    ({"config_feat": np.ones([4, 23], np.float32)}, "config_feat must have 24 features per row"),
    ({"node_opcode": np.array([1, 2], np.uint8)}, "node_opcode must have one entry per row of node_feat"),
    ({"config_feat": np.zeros([0, 24], np.float32)}, "config_feat has no rows: zero configs, nothing to score"),
], ids=["nan_node_feat", "inf_config_feat", "no_nodes", "node_feat_width", "config_feat_width", "opcode_length",
        "zero_configs"])
def test_plain_signature_refuses_input_it_cannot_score_naming_it(tile_export, replaced, message):
  serve = tile_export.signatures[saved_model.PLAIN_SIGNATURE]
  assert serve(**_tile_arrays())["scores"].shape == (4,)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    serve(**_tile_arrays(**replaced))


def test_examples_signature_scores_an_empty_batch_to_no_scores(tile_export):
  served = tile_export.signatures[saved_model.EXAMPLES_SIGNATURE](examples=tf.constant([], tf.string))["scores"]
  assert served.shape == (0,) and served.dtype == tf.float32


def test_examples_signature_refuses_nan_features(tile_export):
  loaded = tile_export
  graph = npz.read_graph(sample_data.require_sample(REAL_TILE_FILES[1]))
  graph = dataclasses.replace(graph, config_feat=np.where(np.arange(graph.num_configs)[:, None] == 3, np.nan,
                                                          graph.config_feat).astype(np.float32))
  examples = [records.serialize(joined) for joined in _joined_graphs("tile", graph)]
  with pytest.raises(tf.errors.InvalidArgumentError, match="examples: the feat of node set config holds NaN"):
    loaded.signatures[saved_model.EXAMPLES_SIGNATURE](examples=tf.constant(examples))


@pytest.mark.parametrize("bad", [b"garbage bytes", tf.train.Example().SerializeToString()],
                         ids=["garbage", "an_example_without_the_schemas_features"])
def test_examples_signature_refuses_an_element_that_is_no_serialized_graph_naming_input_and_element(tile_export,
                                                                                                   bad):
  graph = npz.read_graph(sorted((locations.EMBEDDED_NPZ / "tile/xla/valid").glob("*.npz"))[0])
  good = records.serialize(_joined_graphs("tile", graph)[0])
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"examples: element\] \[1\] \[\(zero-based\) is no "
                     r"serialized GraphTensor of the tile schema \(data/schemas/tile.pbtxt\)"):
    tile_export.signatures[saved_model.EXAMPLES_SIGNATURE](examples=tf.constant([good, bad, good]))


def test_unknown_collection_kind_is_rejected(tile_run):
  _, scorer = tile_run
  with pytest.raises(ValueError, match="unknown collection kind 'kernel'"):
    saved_model.ServingModule(scorer, "kernel")


@pytest.fixture(scope="module")
def pruning_layout_run(tmp_path_factory):
  """The real unet_3d file (40 configs), an untrained layout model pruning to 1-hop neighbourhoods,
  its export with the static signatures and the export loaded. The model has both halves: one
  round of context message passing, then 8-unit per-config states."""
  graph, scorer = _small_layout_scorer(sample_data.require_sample(REAL_LAYOUT_FILE), 40, context_layers=1,
                                       config_units=8)
  task = tasks.LayoutTask(prune_hops=1)
  export_dir = tmp_path_factory.mktemp("pruning_layout_run") / "export"
  saved_model.export(scorer, "layout", export_dir, task.structure_transform, signatures.static_functions)
  return graph, scorer, task, export_dir, tf.saved_model.load(str(export_dir))


def test_layout_model_exports_with_pruning_inside_and_serves_both_signatures(pruning_layout_run):
  graph, scorer, task, _, loaded = pruning_layout_run
  joined = _joined_graphs("layout", graph)
  expected = np.concatenate([scorer(task.structure_transform(g).with_indices_dtype(tf.int32)).numpy() for g in joined])
  plain = loaded.signatures[saved_model.PLAIN_SIGNATURE](
      node_feat=tf.constant(graph.node_feat), node_opcode=tf.constant(graph.node_opcode),
      edge_index=tf.constant(graph.edge_index), node_config_ids=tf.constant(graph.node_config_ids),
      node_config_feat=tf.constant(graph.node_config_feat))["scores"].numpy()
  examples = loaded.signatures[saved_model.EXAMPLES_SIGNATURE](
      examples=tf.constant([records.serialize(g) for g in joined]))["scores"].numpy()
  np.testing.assert_allclose(plain, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(examples, expected, rtol=1e-5, atol=1e-5)
  assert np.ptp(plain) > 0
  with pytest.raises(tf.errors.InvalidArgumentError, match="node_config_feat has not one column"):
    loaded.signatures[saved_model.PLAIN_SIGNATURE](
        node_feat=tf.constant(graph.node_feat), node_opcode=tf.constant(graph.node_opcode),
        edge_index=tf.constant(graph.edge_index), node_config_ids=tf.constant(graph.node_config_ids[:5]),
        node_config_feat=tf.constant(graph.node_config_feat))


def _row_states(loaded, bucket: layout_shapes.LayoutBucket, node_config_feat: np.ndarray, slot_ops: np.ndarray,
                structure: dict) -> np.ndarray:
  """(C, K, units) the rows signature's state of every config row of node_config_feat (C, K, 18),
  slot k's op being slot_ops[k], ROWS_PER_CALL rows a call (the host's work; it calls it once per
  distinct row)."""
  rows = node_config_feat.reshape(-1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH)
  ops = np.tile(slot_ops, node_config_feat.shape[0])
  size = layout_shapes.ROWS_PER_CALL
  states = []
  for start in range(0, len(rows), size):
    batch = np.minimum(np.arange(start, start + size), len(rows) - 1)
    states.append(loaded.signatures[bucket.rows_signature_name](
        node_config_feat=rows[batch], node_feat=structure["node_feat"][ops[batch]],
        node_opcode=structure["node_opcode"][ops[batch]])["row_states"].numpy()[:len(rows) - start])
  return np.concatenate(states).reshape(*node_config_feat.shape[:2], -1)


def test_static_layout_signatures_score_the_pruned_graph_as_the_plain_signature_whatever_the_filler_holds(
    pruning_layout_run):
  """The context signature once, the rows signature on every config row, then a chunk of fewer
  configs than it holds, on arrays padded with noise: filler ops, edges, slots and configs must not
  reach the real configs' scores."""
  graph, _, task, _, loaded = pruning_layout_run
  pruned = task.structure_transform(records.structure_from_arrays(
      "layout", graph.node_feat, graph.node_opcode, graph.edge_index, graph.node_config_ids))
  op, feeds = pruned.node_sets["op"], pruned.edge_sets["feeds"].adjacency
  slots = op["config_slot"].numpy()
  edge_index = np.stack([feeds.target.numpy(), feeds.source.numpy()], 1)
  node_config_ids = np.argsort(np.where(slots >= 0, slots, slots.size))[:graph.node_config_ids.size]
  nodes, edges, configurable = len(slots), len(edge_index), len(node_config_ids)
  buckets = sorted(filter(None, map(layout_shapes.LayoutBucket.from_signature_name, loaded.signatures)),
                   key=lambda bucket: bucket.nodes)
  assert [b.prune_hops for b in buckets] == [1] * len(layout_shapes.LAYOUT_SIZES)
  bucket = next(b for b in buckets if nodes <= b.nodes and edges <= b.edges)
  configs = bucket.configs - 3  # fewer than a chunk holds
  rng = np.random.default_rng(0)

  def padded(rows: np.ndarray, noise: np.ndarray) -> np.ndarray:
    noise[tuple(slice(0, size) for size in rows.shape)] = rows
    return noise

  noise_feat = rng.normal(size=[bucket.nodes, graphs.NODE_FEATURE_WIDTH]).astype(np.float32) * 100
  structure = {
      "node_feat": padded(op["feat"].numpy(), noise_feat),
      "node_opcode": padded(op["opcode"].numpy().astype(np.uint8),
                            rng.integers(0, 256, [bucket.nodes]).astype(np.uint8)),
      "edge_index": padded(edge_index, rng.integers(0, nodes, [bucket.edges, 2])),
      **layout_shapes.neighbour_tables(bucket, edge_index),
      "num_nodes": np.int32(nodes), "num_edges": np.int32(edges)}
  context = loaded.signatures[bucket.context_signature_name](**structure)["context"]
  op_slot = rng.integers(-5, bucket.configurable + 5, [bucket.nodes]).astype(np.int32)  # filler ops: noise
  op_slot[:nodes] = bucket.configurable
  op_slot[node_config_ids] = np.arange(configurable)
  slot_ops = padded(node_config_ids, rng.integers(0, nodes, [bucket.configurable]))
  node_config_feat = padded(graph.node_config_feat[:configs], rng.integers(
      -1, 6, [bucket.configs, bucket.configurable, graphs.LAYOUT_CONFIG_FEATURE_WIDTH]).astype(np.float32))
  static = loaded.signatures[bucket.signature_name](
      **{name: value for name, value in structure.items() if name != "node_opcode"}, context=context,
      op_slot=op_slot, node_config_feat=node_config_feat,
      row_states=_row_states(loaded, bucket, node_config_feat, slot_ops, structure),
      num_configurable=np.int32(configurable), num_configs=np.int32(configs))["scores"].numpy()
  plain = loaded.signatures[saved_model.PLAIN_SIGNATURE](
      node_feat=graph.node_feat, node_opcode=graph.node_opcode, edge_index=graph.edge_index,
      node_config_ids=graph.node_config_ids, node_config_feat=graph.node_config_feat[:configs])["scores"].numpy()
  np.testing.assert_allclose(static[:configs], plain, rtol=1e-5, atol=1e-5)
  assert np.ptp(plain) > 0 and not np.any(static[configs:])


def _layout_arrays(graph: graphs.LayoutGraph, **replaced) -> dict:
  arrays = {name: getattr(graph, name) for name in saved_model.plain_input_names("layout")}
  return {name: tf.constant(value) for name, value in {**arrays, **replaced}.items()}


@pytest.mark.parametrize("replace, message", [
    (lambda g: {"node_config_ids": np.concatenate([g.node_config_ids[:-1], g.node_config_ids[:1]])},
     "node_config_ids lists a node more than once"),
    (lambda g: {"node_config_ids": g.node_config_ids[:0], "node_config_feat": g.node_config_feat[:, :0]},
     "node_config_ids is empty: no node is configurable"),
    (lambda g: {"node_config_feat": np.where(np.arange(18) == 4, 50.0, g.node_config_feat).astype(np.float32)},
     r"node_config_feat holds a value that is not a layout value"),
    (lambda g: {"node_config_feat": np.where(np.arange(18) == 4, 2.5, g.node_config_feat).astype(np.float32)},
     r"node_config_feat holds a value that is not a layout value"),
    (lambda g: {"node_config_feat": g.node_config_feat[:0]}, "node_config_feat has no rows: zero configs"),
], ids=["repeated_configurable_node", "no_configurable_node", "layout_value_50", "layout_value_2_5", "zero_configs"])
def test_layout_plain_signature_refuses_what_the_reader_refuses(layout_export, replace, message):
  graph, loaded = layout_export
  graph, serve = _first_configs(graph, 8), loaded.signatures[saved_model.PLAIN_SIGNATURE]
  assert serve(**_layout_arrays(graph))["scores"].shape == (8,)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    serve(**_layout_arrays(graph, **replace(graph)))


def test_whole_chunks_and_a_single_config_score_like_part_of_a_longer_call(tmp_path):
  # A layout model cannot score an empty chunk, which a count of whole chunks once left over.
  graph, scorer = _small_layout_scorer(sample_data.require_sample(REAL_LAYOUT_FILE),
                                       2 * saved_model.CONFIGS_PER_CALL["layout"] + 10)
  run_export.export_to_run_directory(scorer, tasks.LayoutTask(prune_hops=0), tmp_path)
  loaded = tf.saved_model.load(str(tmp_path / saved_model.EXPORT_DIR_NAME))
  arrays = _plain_arrays(graph)
  longer = loaded.score(*arrays)["scores"].numpy()
  for num_configs in (1, saved_model.CONFIGS_PER_CALL["layout"], 2 * saved_model.CONFIGS_PER_CALL["layout"]):
    np.testing.assert_allclose(loaded.score(*arrays[:-1], arrays[-1][:num_configs])["scores"].numpy(),
                               longer[:num_configs], rtol=1e-5, atol=1e-5)


def test_a_call_scores_alike_whatever_blocks_its_distinct_config_rows_are_computed_in(tmp_path, monkeypatch):
  # 2 chunks and a part: blocks of one chunk each, then of two (the last block one part-filled chunk).
  size = saved_model.CONFIGS_PER_CALL["layout"]
  graph, scorer = _small_layout_scorer(sample_data.require_sample(REAL_LAYOUT_FILE), 2 * size + 10)
  arrays = _plain_arrays(graph)
  scores = {}
  for chunks_per_block in (None, 1, 2):
    if chunks_per_block is not None:
      monkeypatch.setattr(saved_model, "DISTINCT_ROWS_PER_BLOCK", chunks_per_block * size * graph.node_config_ids.size)
    run_export.export_to_run_directory(scorer, tasks.LayoutTask(prune_hops=0), tmp_path / str(chunks_per_block))
    loaded = tf.saved_model.load(str(tmp_path / str(chunks_per_block) / saved_model.EXPORT_DIR_NAME))
    scores[chunks_per_block] = loaded.score(*arrays)["scores"].numpy()
  assert scores[None].shape == (2 * size + 10,)
  for chunks_per_block in (1, 2):  # the same rows' states, computed in batches of other sizes
    np.testing.assert_allclose(scores[chunks_per_block], scores[None], rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def run_without_its_data(tmp_path_factory):
  """A run of the smallest layout experiment, normalizing op features and in segments of 32 ops (both
  taken from its data), trained on a copy of a few embedded nlp default files with its records
  outside the run directory; then the data and the records are moved away. (run directory, a
  validation graph read before the move)."""
  root = tmp_path_factory.mktemp("run_without_its_data")
  data_root = root / "npz"
  for split, count in (("train", 2), ("valid", 1), ("test", 1)):
    (data_root / "layout/nlp/default" / split).mkdir(parents=True)
    for path in sorted((locations.EMBEDDED_NPZ / "layout/nlp/default" / split).glob("*.npz"))[:count]:
      shutil.copy(path, data_root / "layout/nlp/default" / split)
  experiment = experiments.experiment("smallest", "layout:nlp:default").overridden(
      training={"verbose": 0}, model={"normalize": True, "segment_size": 32})
  run_experiment.train(experiment, data_root, root / "run", records_dir=root / "records",
                       exporters=[run_export.export_to_run_directory])
  graph = npz.read_graph(next((data_root / "layout/nlp/default/valid").glob("*.npz")))
  assert graph.node_config_ids.size > 32  # pruned to its configurable ops, still scored in segments
  data_root.rename(root / "moved_npz")
  (root / "records").rename(root / "moved_records")
  return root / "run", graph


def test_a_run_whose_data_is_gone_exports_the_scores_of_its_export_made_with_the_data(run_without_its_data,
                                                                                      tmp_path):
  run_dir, graph = run_without_its_data
  saved = json.loads((run_dir / run_experiment.DATA_DERIVED_FILE).read_text())
  assert saved["segment_size"] == 32 and len(saved["feature_statistics"]["mean"]) == graphs.NODE_FEATURE_WIDTH
  saved_model.export_run(run_dir, tmp_path / "again")
  with_data = tf.saved_model.load(str(run_dir / saved_model.EXPORT_DIR_NAME)).signatures[saved_model.PLAIN_SIGNATURE]
  without = tf.saved_model.load(str(tmp_path / "again")).signatures[saved_model.PLAIN_SIGNATURE]
  expected = with_data(**_layout_arrays(graph))["scores"].numpy()
  assert np.ptp(expected) > 0
  np.testing.assert_allclose(without(**_layout_arrays(graph))["scores"].numpy(), expected, rtol=1e-6, atol=1e-6)


def test_a_run_of_an_older_version_without_its_data_derived_file_is_refused_saying_how_to_export_it(
    run_without_its_data, tmp_path):
  old_run = tmp_path / "old_run"
  shutil.copytree(run_without_its_data[0], old_run)
  (old_run / run_experiment.DATA_DERIVED_FILE).unlink()
  with pytest.raises(run_directory.RunDirectoryError,
                     match=rf"{old_run / run_experiment.DATA_DERIVED_FILE}: not found \(a run of an older version.*\); "
                           r"rerun the command that trained it with the same --out_dir and data") as raised:
    saved_model.export_run(old_run, tmp_path / "export")
  assert "\n" not in str(raised.value) and not (tmp_path / "export").exists()


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
