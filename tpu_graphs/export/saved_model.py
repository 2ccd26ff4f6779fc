"""A trained scorer as a SavedModel a compiler can call: raw TpuGraphs arrays in, scores out.

The exported module needs nothing but TensorFlow to load and run: its signatures take and return
plain tensors, and the GraphTensor (`records.graph_tensor_from_arrays`), the task's per-graph
preprocessing (layout pruning) and the model's feature scaling all happen inside the saved graph. Two signatures:

* `serving_default` (PLAIN_SIGNATURE): the arrays of a TpuGraphs file, in the dtypes the files
  hold, for one graph:
    node_feat (n, 140) float32, node_opcode (n,) uint8, edge_index (m, 2) int64 rows
    [consumer, producer], and
    tile:   config_feat (c, 24) float32;
    layout: node_config_ids (nc,) int64, node_config_feat (c, nc, 18) float32.
* `score_examples` (EXAMPLES_SIGNATURE): examples (b,) string, serialized GraphTensors of the
  collection's schema (data/schemas/<kind>.pbtxt) that hold ops and configs, such as
  `records.serialize(records.join(...))`; the b graphs are scored together.

Both return {"scores": (c,) float32}, one per config in input order (for examples: the
examples' configs one after the other); lower means predicted faster. Input a model cannot score
is refused inside the graph, where a caller without tpu_graphs (a compiler, saved_model_cli) also
meets the check: InvalidArgumentError whose message names the input and the problem, for NaN or
infinite features, a graph without nodes or without configs, a wrong feature width, arrays whose
lengths disagree (node_opcode and node_feat, node_config_ids and node_config_feat), ids out of
range, no or repeated configurable nodes, and layout values that are no dimension index.

An export made for a native library (`static_functions=aot.signatures.static_functions`, which
aot/native_library.py asks for) also holds the static-shape signatures XLA compiles ahead of time
(tpu_graphs/export/aot/: tile models, layout models that prune). Tracing them costs seconds per
export (a layout model's four about 5 CPU-seconds, doubling its export), so training runs leave
them out.

    export(scorer, "tile", "out/tiles/export")
    served = tf.saved_model.load("out/tiles/export")
    served.signatures["serving_default"](node_feat=..., node_opcode=..., edge_index=..., config_feat=...)
    export_run("out/tiles", "/tmp/static", signatures.static_functions)  # a run's best model, rebuilt, static too
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from tpu_graphs.data import graphs, records, storage
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import calibration, experiments, inputs, run_directory, run_experiment, tasks, xla

PLAIN_SIGNATURE = "serving_default"
EXAMPLES_SIGNATURE = "score_examples"
EXPORT_DIR_NAME = "export"  # the serving SavedModel's folder in a run directory
Preprocess = Callable[[tfgnn.GraphTensor], tfgnn.GraphTensor]
# (scorer, kind, preprocess) -> {signature name: tf.function}: the static-shape signatures an
# export adds beside the plain ones (aot.signatures.static_functions).
StaticFunctions = Callable[[tf.keras.Model, str, Optional[Preprocess]], dict]
# Configs scored per model call inside the plain signature, per kind: bounds memory whatever c is,
# while the per-graph work (building the graph, pruning) happens once per signature call. A layout
# call holds (ops x configs x units) states: on the nlp test graph pruned to its 848 configurable
# ops, chunks of 64 configs scored its first 1,000 configs faster than chunks of 32 or 128 (fewer
# trips, states still in cache). A model that does not prune holds all ops' states per chunk.
CONFIGS_PER_CALL = {"tile": 128, "layout": 64}
# Config rows (configs x configurable ops) whose distinct states a serving layout call computes at
# once (distinct_row_states): bounds the (rows, 19) int32 keys to 80 MB however many configs come.
DISTINCT_ROWS_PER_BLOCK = 1 << 20

_GRAPH_INPUTS = (
    tf.TensorSpec([None, graphs.NODE_FEATURE_WIDTH], tf.float32, "node_feat"),
    tf.TensorSpec([None], tf.uint8, "node_opcode"),
    tf.TensorSpec([None, 2], tf.int64, "edge_index"),
)
_CONFIG_INPUTS = {
    "tile": (tf.TensorSpec([None, graphs.TILE_CONFIG_FEATURE_WIDTH], tf.float32, "config_feat"),),
    "layout": (tf.TensorSpec([None], tf.int64, "node_config_ids"),
               tf.TensorSpec([None, None, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], tf.float32, "node_config_feat")),
}


def plain_input_names(kind: str) -> tuple[str, ...]:
  """Input names of the plain signature of a 'tile' or 'layout' model, in argument order."""
  return tuple(spec.name for spec in _GRAPH_INPUTS + _CONFIG_INPUTS[kind])


def _id_checks(name: str, ids: tf.Tensor, bound: tf.Tensor) -> list:
  """Assertions that 0 <= ids < bound (InvalidArgumentError naming `name` otherwise)."""
  bound = tf.cast(bound, ids.dtype)
  return [tf.debugging.assert_non_negative(ids, message=f"{name} holds a negative node index"),
          tf.debugging.assert_less(ids, bound, message=f"{name} holds a node index >= the number of nodes")]


def _width_check(name: str, array: tf.Tensor, width: int) -> tf.Operation:
  """Assertion that the last axis of `array` has `width` entries. Checked at run time: a loaded
  signature passes arrays of any width to the graph."""
  return tf.debugging.assert_equal(tf.shape(array)[-1], width,
                                   message=f"{name} must have {width} features per row (last axis)")


def _finite(name: str, array: tf.Tensor) -> tf.Tensor:
  """`array`, after an assertion that it holds no NaN or infinity (InvalidArgumentError naming
  `name` otherwise). Times zero, exactly those values make the sum NaN: one fused pass, where
  check_numerics took four times as long (28 ms for the 15 M config values of 1,000 nlp configs)."""
  finite = tf.math.is_finite(tf.reduce_sum(array * 0.0))
  with tf.control_dependencies([tf.debugging.Assert(finite, [f"{name} holds NaN or infinite values"])]):
    return tf.identity(array)


def checked_arrays(kind: str, arrays: dict) -> dict:
  """The plain signature's arrays {name: tensor}, each depending on every check of the inputs.

  Features must be finite and of the dataset's widths, the graph must have a node and a config,
  node_opcode one entry per node, edge_index and node_config_ids ids of existing nodes,
  node_config_ids each node once, and node_config_feat one column per entry of node_config_ids
  and layout values only (integer dimension indices in graphs.LAYOUT_VALUE_RANGE): the checks
  the npz reader (graphs.py) makes, so a file the reader refuses is refused here too.
  """
  checked = {name: _finite(name, value) if value.dtype.is_floating else value for name, value in arrays.items()}
  nodes = tf.shape(checked["node_feat"])[0]
  checks = [
      tf.debugging.assert_positive(nodes, message="node_feat has no rows: a graph needs at least one node"),
      _width_check("node_feat", checked["node_feat"], graphs.NODE_FEATURE_WIDTH),
      tf.debugging.assert_equal(tf.shape(checked["node_opcode"])[0], nodes,
                                message="node_opcode must have one entry per row of node_feat"),
      _width_check("edge_index", checked["edge_index"], 2),
      *_id_checks("edge_index", checked["edge_index"], nodes)]
  config_name = "config_feat" if kind == "tile" else "node_config_feat"
  checks.append(tf.debugging.assert_positive(
      tf.shape(checked[config_name])[0], message=f"{config_name} has no rows: zero configs, nothing to score"))
  if kind == "tile":
    checks.append(_width_check("config_feat", checked["config_feat"], graphs.TILE_CONFIG_FEATURE_WIDTH))
  else:
    ids, values = checked["node_config_ids"], checked["node_config_feat"]
    low, high = graphs.LAYOUT_VALUE_RANGE
    checks += [
        tf.debugging.assert_positive(tf.size(ids), message="node_config_ids is empty: no node is configurable, "
                                     "so the configs cannot differ and there is nothing to rank"),
        # Sorted ids strictly ascend iff none repeats (sort, unlike unique, also compiles under XLA).
        tf.debugging.assert_equal(tf.reduce_all(tf.sort(ids)[1:] > tf.sort(ids)[:-1]), True,
                                  message="node_config_ids lists a node more than once"),
        tf.debugging.assert_equal(
            tf.reduce_all((values >= low) & (values <= high) & (values == tf.round(values))), True,
            message=f"node_config_feat holds a value that is not a layout value (an integer dimension index in "
                    f"[{low}, {high}], -1 unset)"),
        _width_check("node_config_feat", checked["node_config_feat"], graphs.LAYOUT_CONFIG_FEATURE_WIDTH),
        tf.debugging.assert_equal(tf.shape(checked["node_config_feat"])[1], tf.shape(checked["node_config_ids"])[0],
                                  message="node_config_feat has not one column per entry of node_config_ids"),
        *_id_checks("node_config_ids", checked["node_config_ids"], nodes)]
  with tf.control_dependencies(checks):
    return {name: tf.identity(value) for name, value in checked.items()}


def parseable_examples(kind: str, examples: tf.Tensor) -> tf.Tensor:
  """`examples` (b,) string, depending on the check that each parses as a GraphTensor of the
  collection's schema: garbage bytes or another message fail with InvalidArgumentError naming the
  input and its first bad element, where TensorFlow's parser names neither ("Could not parse
  example input"). Each element is parsed alone, its errors dropped (tf.data's ignore_errors), and
  the elements that parsed are counted."""
  io_spec = tfgnn.get_io_spec(records.graph_spec(kind))

  def parsed(index, example):  # the index, and a value that depends on every parsed feature
    features = tf.io.parse_example(example[tf.newaxis], io_spec)
    return index, tf.add_n([tf.size(value, out_type=tf.int64)
                            for value in tf.nest.flatten(features, expand_composites=True)])

  count = tf.size(examples, out_type=tf.int64)
  parsed_elements = tf.data.Dataset.from_tensor_slices(examples).enumerate().map(parsed).ignore_errors().reduce(
      tf.zeros([count], tf.bool), lambda held, element: tf.tensor_scatter_nd_update(held, [[element[0]]],
                                                                                     [element[1] >= 0]))
  # The first element that did not parse; Assert computes its data even where the check passes, and
  # an argmin over an empty batch fails, so a False stands past the end.
  first_unparsed = tf.argmin(tf.cast(tf.concat([parsed_elements, [False]], 0), tf.int32))
  check = tf.debugging.Assert(tf.reduce_all(parsed_elements), [
      "examples: element", first_unparsed,
      f"(zero-based) is no serialized GraphTensor of the {kind} schema (data/schemas/{kind}.pbtxt): garbage bytes, "
      "another message or one missing the schema's features"])
  with tf.control_dependencies([check]):
    return tf.identity(examples)


def checked_examples(kind: str, graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """The parsed examples' graph, its features checked to be finite and every graph to have an op."""
  featured = ("op", "config") if kind == "tile" else ("op", "node_config")
  with tf.control_dependencies([tf.debugging.assert_positive(
      graph.node_sets["op"].sizes, message="examples: a graph without ops (node set 'op' is empty)")]):
    return graph.replace_features(node_sets={
        name: {**graph.node_sets[name].features, "feat": _finite(f"examples: the feat of node set {name}",
                                                                graph.node_sets[name]["feat"])}
        for name in featured})


# Every serving function is traced without autograph: none branches or loops on a tensor in Python
# (the chunk loop is an explicit tf.while_loop), and converting the source of every layer it calls
# took about half of an export's time.
serving_function = functools.partial(tf.function, autograph=False)


def model_graph(graph: tfgnn.GraphTensor) -> tfgnn.GraphTensor:
  """A graph as the scorer takes it: the model's features, the training inputs' index dtype."""
  return xla.model_features(graph).with_indices_dtype(inputs.INDICES_DTYPE)


def _scored_chunks(first: tf.Tensor, last: tf.Tensor, size: int, total: tf.Tensor, parts: tf.TensorArray,
                   score: Callable[[tf.Tensor], tf.Tensor]) -> tf.TensorArray:
  """`parts` with element i, for chunks first <= i < last, the (size,) scores of configs
  i * size ... (i + 1) * size - 1, which `score` gets as positions; positions past the last
  config (total - 1) repeat it."""
  def score_chunk(chunk, parts):
    return chunk + 1, parts.write(chunk, score(tf.minimum(chunk * size + tf.range(size), total - 1)))

  _, parts = tf.while_loop(lambda chunk, _: chunk < last, score_chunk, (first, parts),
                           parallel_iterations=1)  # one chunk alive at a time
  return parts


def _joined_parts(parts: tf.TensorArray, total: tf.Tensor) -> tf.Tensor:
  """The (total,) scores of `_scored_chunks`' parts, without the repeats that filled the last chunk."""
  return tf.reshape(parts.stack(), [-1])[:total]


def distinct_row_states(config_scorer: layout_model.ConfigScorer, structure: tfgnn.GraphTensor,
                        config_features: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """The states of all distinct config rows of a call, (D, units), and (c, nc) int32 the index of
  each config's row per slot among them.

  Configs repeat a few rows per op (6,437 distinct among the nlp graph's first 1,000 configs x 848
  ops, against 3,695 per chunk of 32), so computing them once per call rather than per chunk
  saves most of that work.
  """
  op = structure.node_sets["op"]
  num_configs, num_slots = tf.shape(config_features)[0], tf.shape(config_features)[1]
  states, index = config_scorer.distinct_row_states(
      tf.reshape(config_features, [-1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH]),
      tf.tile(records.slot_ops(op["config_slot"], num_slots), [num_configs]),
      layout_model.row_op_inputs(op["feat"], op["opcode"]))
  return states, tf.reshape(index, [num_configs, num_slots])


class ServingModule(tf.Module):
  """The scorer behind both signatures. Tracks only the scorer's variables, not the Keras model,
  so that loading needs neither Keras layer classes nor TF-GNN's GraphTensor type."""

  def __init__(self, scorer: tf.keras.Model, kind: str, preprocess: Optional[Preprocess] = None,
               static_functions: Optional[StaticFunctions] = None):
    super().__init__(name=f"{kind}_scorer")
    if kind not in _CONFIG_INPUTS:
      raise ValueError(f"unknown collection kind {kind!r}: expected 'tile' or 'layout'")
    self.scorer_variables = list(scorer.variables)

    def scored(graph) -> tf.Tensor:
      return scorer(model_graph(graph))

    def scores(graph) -> dict:
      return {"scores": scored(preprocess(graph) if preprocess is not None else graph)}

    halves = layout_model.context_and_scores(scorer) if kind == "layout" else None
    # Pruning's sizes are data, so a pruning model's plain signature does not compile under XLA
    # anyway: it computes each distinct config row once per block of chunks (a count XLA cannot
    # compile either) and places rows by gathers; without pruning the signature stays compilable.
    serving = isinstance(preprocess, layout_preprocessing.Pruning)

    def chunked_scores(structure, config_features) -> tf.Tensor:
      """Scores of all configs, CONFIGS_PER_CALL[kind] at a time, joined to the once-preprocessed structure.

      A layout model in two halves (layout_model.context_and_scores) computes the graph's op
      context once and scores each chunk against it; serving, it also computes the states of the
      distinct config rows once per block of chunks (distinct_row_states). Every model call sees
      a chunk of one static size (the last one filled up with copies of the last config, whose
      scores are dropped), so without pruning the whole function also compiles under XLA for
      given input shapes (a compiler may AOT-compile it).
      """
      size = CONFIGS_PER_CALL[kind]
      total = tf.shape(config_features)[0]
      chunks = tf.maximum((total + size - 1) // size, 1)
      parts = tf.TensorArray(tf.float32, size=chunks, element_shape=[size])

      def chunk_graph(positions):
        return records.join(kind, structure, records.chunk_from_arrays(
            kind, tf.gather(config_features, positions), positions[0]))

      if halves is None:
        return _joined_parts(_scored_chunks(0, chunks, size, total, parts, lambda positions: scored(
            chunk_graph(positions))), total)
      structure_graph = model_graph(structure)
      context = halves.context(structure_graph)
      if not serving:
        return _joined_parts(_scored_chunks(0, chunks, size, total, parts, lambda positions: halves.config_scorer(
            (model_graph(chunk_graph(positions)), context))), total)
      chunks_per_block = tf.maximum(DISTINCT_ROWS_PER_BLOCK // (size * tf.maximum(tf.shape(config_features)[1], 1)), 1)

      def score_block(block, parts):
        first, last = block * chunks_per_block, tf.minimum((block + 1) * chunks_per_block, chunks)
        states, index = distinct_row_states(halves.config_scorer, structure_graph,
                                            config_features[first * size:tf.minimum(last * size, total)])

        def score(positions):
          rows = tf.gather(states, tf.reshape(tf.gather(index, positions - first * size), [-1]))
          return halves.config_scorer((model_graph(chunk_graph(positions)), context), serving=True, rows=rows)

        return block + 1, _scored_chunks(first, last, size, total, parts, score)

      blocks = (chunks + chunks_per_block - 1) // chunks_per_block
      _, parts = tf.while_loop(lambda block, _: block < blocks, score_block, (tf.constant(0), parts),
                               parallel_iterations=1)
      return _joined_parts(parts, total)

    def score_arrays(*arrays):
      checked = checked_arrays(kind, dict(zip(plain_input_names(kind), arrays)))
      config_features = checked["config_feat" if kind == "tile" else "node_config_feat"]
      structure = records.structure_from_arrays(kind, checked["node_feat"], checked["node_opcode"],
                                                checked["edge_index"], checked.get("node_config_ids"))
      if preprocess is not None:
        structure = preprocess(structure)
      return {"scores": chunked_scores(structure, config_features)}

    self.score = serving_function(score_arrays, input_signature=_GRAPH_INPUTS + _CONFIG_INPUTS[kind])
    self.score_examples = serving_function(
        lambda examples: scores(checked_examples(kind, tfgnn.parse_example(
            records.graph_spec(kind), parseable_examples(kind, examples)).merge_batch_to_components())),
        input_signature=[tf.TensorSpec([None], tf.string, "examples")])
    # Static shapes for XLA AOT, if asked (aot.signatures).
    self.static_functions = static_functions(scorer, kind, preprocess) if static_functions is not None else {}

  def signatures(self) -> dict:
    return {PLAIN_SIGNATURE: self.score, EXAMPLES_SIGNATURE: self.score_examples, **self.static_functions}


def export(scorer: tf.keras.Model, kind: str, export_dir, preprocess: Optional[Preprocess] = None,
           static_functions: Optional[StaticFunctions] = None, keep: Sequence[str] = ()) -> None:
  """Writes the serving SavedModel of `scorer` (GraphTensor -> (c,) scores) to `export_dir`.

  `preprocess` (GraphTensor -> GraphTensor, e.g. a task's pruning) runs inside the exported graph
  before the scorer, so callers pass raw arrays and get what training saw. `static_functions`
  (aot.signatures.static_functions) adds the static-shape signatures a native library compiles. `keep`:
  folders of a local export_dir's earlier content carried into the new one (what was built from
  it, e.g. native/).

  The folder is written beside its final place and swapped in, so readers never see half of it.
  """
  module = ServingModule(scorer, kind, preprocess, static_functions)

  def write(path: str) -> None:
    tf.saved_model.save(module, path, signatures=module.signatures())
    for name in keep:
      earlier = storage.join(export_dir, name)
      if storage.is_local(export_dir) and os.path.isdir(earlier):
        shutil.copytree(earlier, os.path.join(path, name), symlinks=True)

  storage.atomic_directory(export_dir, write)


def weights_fingerprint(export_dir) -> str:
  """A SHA-256 of a SavedModel's variables, names and values: equal for two exports of the same
  model with the same weights (what native_library records of the model it compiled)."""
  reader = tf.train.load_checkpoint(storage.join(export_dir, "variables", "variables"))
  digest = hashlib.sha256()
  for name in sorted(reader.get_variable_to_shape_map()):
    if name != "_CHECKPOINTABLE_OBJECT_GRAPH":
      digest.update(name.encode() + b"\0" + np.ascontiguousarray(reader.get_tensor(name)).tobytes())
  return digest.hexdigest()


def model_input_spec(kind: str) -> tfgnn.GraphTensorSpec:
  """The relaxed input spec a model of `kind` is built on for serving: that of a 3-op graph with 2
  configs, any number of components, nodes and edges."""
  layout = kind == "layout"
  example = records.graph_tensor_from_arrays(
      kind, np.ones([3, graphs.NODE_FEATURE_WIDTH], np.float32), np.zeros([3], np.uint8), np.array([[1, 0], [2, 1]]),
      config_feat=None if layout else np.ones([2, graphs.TILE_CONFIG_FEATURE_WIDTH], np.float32),
      node_config_ids=np.array([1]) if layout else None,
      node_config_feat=np.ones([2, 1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH], np.float32) if layout else None)
  return example.with_indices_dtype(inputs.INDICES_DTYPE).spec.relax(num_components=True, num_nodes=True,
                                                                      num_edges=True)


def best_scorer(run_dir) -> tuple[experiments.Experiment, tf.keras.Model]:
  """The experiment of the training run in `run_dir` and its scorer with the run's best weights.

  The model is rebuilt from the run directory alone (run_experiment.run_model_builder: the
  experiment and model settings of its config.json, what the model took from the data as the run
  saved it) and given the run's best weights (best/weights); the run's data need not be there.
  Raises run_directory.RunDirectoryError for a run without config.json, without best weights, or
  of an older version that saved nothing of its data (saying how to re-export it).
  """
  experiment, build = run_experiment.run_model_builder(run_dir, run_directory.finished_run_config(run_dir))
  scorer = build(model_input_spec(graphs.collection_kind(experiment.collection)))
  run_directory.initialise_from_run(scorer, run_dir)
  return experiment, scorer


def export_run(run_dir, export_dir, static_functions: Optional[StaticFunctions] = None) -> None:
  """Exports the best model of the training run in `run_dir` (best_scorer) to `export_dir` again,
  as run_export.export_to_run_directory did, with `static_functions`' signatures if given."""
  experiment, scorer = best_scorer(run_dir)
  task = experiment.task()
  export(scorer, task.kind, export_dir, task.structure_transform, static_functions)
  calibration.copy(run_dir, export_dir)
