"""Candidate configs of new code: a Keras CNN's HLO gets candidate layouts and tile sizes, ranked
by exported models through the Ranker and baselines/rank.py."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import shared_fixtures
from tpu_graphs.data import graphs
from tpu_graphs.export import ranker
from tpu_graphs.hlo import candidates, fusion_kernels, hlo_input
from tpu_graphs.hlo import descriptions
from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import features
from tpu_graphs.hlo import from_tensorflow

RANK_PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "rank.py"


@pytest.fixture(scope="module")
def cnn_modules(tmp_path_factory):
  """A small Keras CNN's unoptimized and optimized HLO, saved as .pb files as a user would."""
  root = tmp_path_factory.mktemp("cnn")
  inputs = tf.keras.Input([16, 16, 3])
  x = tf.keras.layers.Conv2D(8, 3, activation="relu")(inputs)
  x = tf.keras.layers.Conv2D(16, 3, activation="relu")(x)
  x = tf.keras.layers.GlobalAveragePooling2D()(x)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(10)(x), name="small_cnn")
  compiler_ir = tf.function(lambda images: model(images, training=False), jit_compile=True) \
      .experimental_get_compiler_ir(tf.TensorSpec([1, 16, 16, 3]))
  (root / "hlo.pb").write_bytes(compiler_ir(stage="hlo_serialized"))
  (root / "optimized.pb").write_bytes(compiler_ir(stage="optimized_hlo_serialized"))
  return root / "hlo.pb", root / "optimized.pb", model


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """A layout and a tile model exported for serving (the shared fixtures layout_export, untrained:
  ranking needs scores, not good ones, and tile_run's)."""
  root = tmp_path_factory.mktemp("models")
  return (shared_fixtures.unpack("layout_export", root / "layout") / "export",
          shared_fixtures.unpack("tile_run", root / "tile") / "run" / "export")


def test_program_candidates_are_distinct_legal_layouts_starting_at_the_default(cnn_modules):
  [graph] = candidates.candidate_graphs_from_file(cnn_modules[0], 40, seed=3)
  feat = graph.node_config_feat  # (c, nc, 18)
  assert feat.shape[0] == 40 and graph.split == "test" and not graph.config_runtime.any()
  assert len({row.tobytes() for row in feat}) == 40
  dims = features.LAYOUT_MAX_DIMS
  for j in range(feat.shape[1]):
    for slot in range(features.LAYOUT_MAX_TENSORS):
      orders = feat[:, j, slot * dims:(slot + 1) * dims]
      written = int((orders[0] >= 0).sum())
      if written == 0:
        assert (orders == -1).all()
        continue
      # Configs write the CONFIGURED_LAYOUT_DIMS minor-most dims (fewer for rank 1), the rest -1. Config 0
      # is the default (descending dims, the last minor-most); every config is a candidate of that
      # tensor (default or its one alternative), distinct dims within the tensor's rank.
      assert written <= features.CONFIGURED_LAYOUT_DIMS and (orders[:, written:] == -1).all()
      rank = int(orders[0, 0]) + 1
      assert orders[0, :written].tolist() == list(candidates.default_layout(rank))[:written]
      assert len({tuple(o[:written]) for o in orders}) <= 2
      assert all(len(set(o[:written])) == written and max(o[:written]) < rank for o in orders)
  again = candidates.candidate_graphs_from_file(cnn_modules[0], 40, seed=3)[0].node_config_feat
  other = candidates.candidate_graphs_from_file(cnn_modules[0], 40, seed=4)[0].node_config_feat
  np.testing.assert_array_equal(again, feat)
  assert not np.array_equal(other, feat)
  tensors = descriptions.configurable_tensors(hlo_input.read_hlo_file(cnn_modules[0]), graph.node_config_ids)
  assert descriptions.describe(graph, 0, tensors) == {"layouts": {}}  # the defaults: the module's own layouts
  moved = descriptions.describe(graph, 1, tensors)["layouts"]
  assert moved and set(moved) <= {t.name for t in tensors}
  # Without a module (an npz file) every configurable node a config sets is listed, by index.
  assert set(descriptions.describe(graph, 0)["layouts"]) == {f"node {i}" for i in graph.node_config_ids}


def test_a_training_steps_weight_gradient_convolutions_vary_their_result_layout_and_forward_ones_do_not(cnn_modules):
  model = cnn_modules[2]

  def training_step(images):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(model(images, training=True)))
    return tape.gradient(loss, model.trainable_variables)
  module = from_tensorflow.hlo_module(training_step, tf.TensorSpec([2, 16, 16, 3]))
  graph = candidates.program_candidates(module, 100, seed=0)
  instructions = featurize.module_features(module).instructions
  results = {}  # convolution's output batch dimension -> the result orders its configs take
  for j, node in enumerate(graph.node_config_ids):
    if instructions[node].opcode == "convolution":
      numbers = instructions[node].convolution_dimension_numbers
      orders = {tuple(row[:4].astype(int)) for row in graph.node_config_feat[:, j, :features.LAYOUT_MAX_DIMS]}
      results.setdefault(numbers.output_batch_dimension, []).append((numbers, orders))
  # Activations (batch major-most) keep the output features minor-most; kernel gradients (their
  # "batch" the input features) take both orders of their two feature dims.
  activations, kernels = results.pop(0), results.pop(2)
  assert not results and len(kernels) == 2 and len(activations) >= 3
  assert all(orders == {(3, 2, -1, -1)} for _, orders in activations)
  for numbers, orders in kernels:
    assert (numbers.output_feature_dimension, numbers.output_batch_dimension) == (3, 2)
    assert orders == {(3, 2, -1, -1), (2, 3, -1, -1)}


def test_kernel_candidates_are_distinct_tile_sizes_sampled_down_to_the_count_asked(cnn_modules):
  kernels = candidates.candidate_graphs_from_file(cnn_modules[1], 30, kernels=True)
  assert max(k.config_feat.shape[0] for k in kernels) == 30
  modules = fusion_kernels.kernel_modules(hlo_input.read_hlo_file(cnn_modules[1]))
  for kernel, module in zip(kernels, modules, strict=True):
    assert len({row.tobytes() for row in kernel.config_feat}) == kernel.config_feat.shape[0]
    offered = {(tuple(o), tuple(k)) for o, k in candidates.tile_candidates(*candidates.kernel_extents(module), None)
               } if kernel.config_feat.shape[0] < 30 else None
    for config in range(kernel.config_feat.shape[0]):
      described = descriptions.describe(kernel, config)
      assert len(described["output_tile"]) == len(candidates.kernel_extents(module)[0])
      if offered is not None:
        assert (tuple(described["output_tile"]), tuple(described["kernel_tile"])) in offered


def test_keras_model_graphs_carry_candidates_when_asked(cnn_modules):
  model = cnn_modules[2]
  plain = from_tensorflow.from_keras_model(model, kernels=True)
  assert plain.program.node_config_feat.shape[0] == 1 and all(k.config_feat.shape[0] == 1 for k in plain.kernels)
  result = from_tensorflow.from_keras_model(model, kernels=True, num_candidates=12, seed=1)
  assert result.program.node_config_feat.shape[0] == 12
  np.testing.assert_array_equal(result.program.node_config_feat[0], plain.program.node_config_feat[0])
  assert max(k.config_feat.shape[0] for k in result.kernels) >= 2


def test_unoptimized_module_as_kernels_names_the_file_and_the_stage_needed(cnn_modules):
  path = cnn_modules[0]
  for run in (lambda: candidates.candidate_graphs_from_file(path, 10, kernels=True),
              lambda: featurize.graphs_from_file(path, kernels=True)):
    with pytest.raises(graphs.GraphFileError, match=r"optimized_hlo_serialized") as raised:
      run()
    assert str(path) in str(raised.value)


def test_ranker_ranks_candidates_of_the_cnn(cnn_modules, exports):
  layout_export, tile_export = exports
  [program] = ranker.Ranker(layout_export).rank_file(cnn_modules[0], num_candidates=30)
  assert program.scores.size == 30 and len(set(program.scores.tolist())) >= 10
  assert np.all(np.diff(program.scores[program.order]) >= 0)
  kernels = ranker.Ranker(tile_export).rank_file(cnn_modules[1], kernels=True, num_candidates=30)
  assert max(k.scores.size for k in kernels) >= 2
  with pytest.raises(ValueError, match="carries its own configs"):
    ranker.Ranker(tile_export).rank_file(cnn_modules[0].with_suffix(".npz"), num_candidates=3)


def _rank(model, path, *extra) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={model}", f"--input={path}", *extra],
                        capture_output=True, text=True)


def test_rank_program_ranks_layout_and_tile_candidates(cnn_modules, exports, tmp_path):
  layout_export, tile_export = exports
  completed = _rank(layout_export, cnn_modules[0], "--num_candidates=50", "--top=12", f"--json={tmp_path / 'l.json'}")
  assert completed.returncode == 0, completed.stderr
  [written] = json.loads((tmp_path / "l.json").read_text())
  scores = [entry["score"] for entry in written["best"]]
  assert written["num_configs"] == 50 and len({entry["config"] for entry in written["best"]}) == 12
  assert scores == sorted(scores) and all("layouts" in entry for entry in written["best"])
  assert f"50 configs, best first: {written['best'][0]['config']} (" in completed.stdout

  completed = _rank(tile_export, cnn_modules[1], "--kernels", "--num_candidates=20", f"--json={tmp_path / 't.json'}")
  assert completed.returncode == 0, completed.stderr
  kernels = json.loads((tmp_path / "t.json").read_text())
  assert max(entry["num_configs"] for entry in kernels) >= 2
  assert all(best["output_tile"] for entry in kernels for best in entry["best"])

  completed = _rank(tile_export, cnn_modules[0], "--kernels")
  assert completed.returncode != 0
  assert str(cnn_modules[0]) in completed.stderr and "optimized_hlo_serialized" in completed.stderr


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
