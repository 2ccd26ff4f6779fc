"""Layout model: per-config scores, GraphNorm's centring and scaling, Graph Segment Training
gradients, chunked (graphs pruned once as read) = unchunked scoring (pruned inside the model),
the serving path (distinct config rows once, placed by gathers) = training's, the recipe
learning a real program, and the recipe ranking programs it never saw."""

import dataclasses
import pathlib
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

import sample_data
from tpu_graphs.data import config_split, convert, npz, predictions, records
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import experiments, metrics, run_experiment, scoring, tasks

GENERATED_VALID = pathlib.Path(__file__).resolve().parents[2] / "data/generated/npz/layout/xla/default/valid"


def _chain_program(num_nodes: int = 40, num_configs: int = 5):
  """A chain of ops (i -> i+1) with every 5th op configurable; features positive and distinct."""
  rng = np.random.default_rng(0)
  edges = np.stack([np.arange(1, num_nodes), np.arange(num_nodes - 1)], axis=1)  # [consumer, producer]
  configurable = np.arange(0, num_nodes, 5)
  return (rng.uniform(1, 5, (num_nodes, 140)).astype(np.float32), edges, configurable,
          rng.integers(0, 4, (num_configs, configurable.size, 18)).astype(np.float32))


def test_scores_one_value_per_config_that_depends_on_its_features():
  node_feat, edges, configurable, node_config_feat = _chain_program()
  graph = records.graph_tensor_from_arrays("layout", node_feat, np.zeros(40, np.uint8), edges,
                                           node_config_ids=configurable, node_config_feat=node_config_feat)
  model = layout_model.build_layout_model(graph.spec, units=16, num_layers=2)
  scores = model(graph).numpy()
  assert scores.shape == (5,)
  assert np.unique(scores).size == 5
  same = records.graph_tensor_from_arrays("layout", node_feat, np.zeros(40, np.uint8), edges,
                                          node_config_ids=configurable, node_config_feat=node_config_feat[[2, 2]])
  np.testing.assert_allclose(model(same).numpy(), scores[[2, 2]], rtol=1e-5)


def _op_states_graph(states: np.ndarray, sizes: list[int]):
  """A GraphTensor of op nodes (n, k, d) hidden states, in components of `sizes` ops."""
  return tfgnn.GraphTensor.from_pieces(
      context=tfgnn.Context.from_fields(sizes=tf.constant([1] * len(sizes))),
      node_sets={"op": tfgnn.NodeSet.from_fields(sizes=tf.constant(sizes),
                                                 features={tfgnn.HIDDEN_STATE: tf.constant(states, tf.float32)})})


@pytest.mark.parametrize("scale", [False, True])
def test_graph_norm_centres_each_graphs_configs_and_scales_only_when_asked(scale):
  rng = np.random.default_rng(0)
  states = rng.normal(size=(7, 2, 4))  # ops of two graphs (3 and 4 ops), 2 configs, 4 units
  norm = layout_model.GraphNorm(4, scale=scale)
  normalized = norm(_op_states_graph(states, [3, 4])).node_sets["op"][tfgnn.HIDDEN_STATE].numpy()
  for ops in (slice(0, 3), slice(3, 7)):  # alpha = gamma = 1, beta = 0 at the start: (h - mean) [/ spread]
    centred = states[ops] - states[ops].mean(axis=0)
    expected = centred / np.sqrt((centred ** 2).mean(axis=0) + 1e-5) if scale else centred
    np.testing.assert_allclose(normalized[ops], expected, rtol=1e-4, atol=1e-5)
  # A program whose op states spread twice as far: centring keeps the factor, scaling removes it.
  doubled = norm(_op_states_graph(2 * states, [3, 4])).node_sets["op"][tfgnn.HIDDEN_STATE].numpy()
  np.testing.assert_allclose(doubled, normalized if scale else 2 * normalized, rtol=1e-3, atol=1e-4)


def test_segment_training_sends_gradients_only_to_the_sampled_segment():
  node_feat, edges, configurable, node_config_feat = _chain_program()
  features = tf.constant(node_feat)
  graph = records.graph_tensor_from_arrays("layout", features, np.zeros(40, np.uint8), edges,
                                           node_config_ids=configurable, node_config_feat=node_config_feat)
  model = layout_model.build_layout_model(graph.spec, units=16, num_layers=2, segment_size=10)
  reached = set()
  for _ in range(6):
    with tf.GradientTape() as tape:
      tape.watch(features)
      graph = records.graph_tensor_from_arrays("layout", features, np.zeros(40, np.uint8), edges,
                                               node_config_ids=configurable, node_config_feat=node_config_feat)
      loss = tf.reduce_sum(model(graph, training=True) ** 2)
    rows = np.flatnonzero(np.abs(tf.convert_to_tensor(tape.gradient(loss, features)).numpy()).sum(axis=1) > 0)
    assert rows.size > 0 and np.unique(rows // 10).size == 1  # one segment of 10 ops
    reached.add(int(rows[0] // 10))
  assert len(reached) > 1  # the segment is resampled each step
  with tf.GradientTape() as tape:  # outside training, every op gets gradients
    tape.watch(features)
    graph = records.graph_tensor_from_arrays("layout", features, np.zeros(40, np.uint8), edges,
                                             node_config_ids=configurable, node_config_feat=node_config_feat)
    loss = tf.reduce_sum(model(graph) ** 2)
  assert np.unique(np.flatnonzero(np.abs(tf.convert_to_tensor(tape.gradient(loss, features)).numpy()).sum(axis=1) > 0) // 10).size == 4


def test_chunked_scoring_of_graphs_pruned_once_equals_scoring_all_configs_at_once(tmp_path):
  source = GENERATED_VALID / "mobilenet.b1.f32.npz"
  (tmp_path / "npz/layout/xla/default/valid").mkdir(parents=True)
  graph = npz.read_graph(source)
  graph = dataclasses.replace(graph, node_config_feat=graph.node_config_feat[:200],  # 1,000 tell no more
                              config_runtime=graph.config_runtime[:200])
  npz.write_graph(tmp_path / "npz/layout/xla/default/valid/small.npz", graph)
  convert.convert_directory(tmp_path / "npz", tmp_path / "chunked", configs_per_chunk=37, progress=False)  # 6 chunks
  unchunked = records.graph_tensor_from_arrays("layout", graph.node_feat, graph.node_opcode, graph.edge_index,
                                               node_config_ids=graph.node_config_ids,
                                               node_config_feat=graph.node_config_feat)
  spec = records.graph_spec("layout").relax(num_components=True, num_nodes=True, num_edges=True)
  model = layout_model.build_layout_model(spec, units=16, num_layers=2)
  # The task prunes each graph once as the records are read; here the whole graph is pruned at once.
  scored = scoring.score_records(tasks.LayoutTask(prune_hops=1), model,
                                 tmp_path / "chunked/layout/xla/default/valid", batch_size=2)
  runtimes, scores = scored["layout:xla:default:small"]
  assert scores.shape == (graph.num_configs,)
  pruned = layout_preprocessing.prune_to_configurable(unchunked, 1).with_indices_dtype(tf.int32)
  expected = model(pruned).numpy()
  # float32 sums taken in another order differ by a few units in the last place of the largest
  # score (about 10 here), so a score near zero may differ by 1e-5 of that, not of itself.
  np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
  assert not np.allclose(scores, model(unchunked.with_indices_dtype(tf.int32)).numpy(), rtol=1e-3)
  np.testing.assert_array_equal(runtimes, graph.config_runtime.astype(np.float32))


def test_recipe_ranks_held_out_configs_of_a_real_program(tmp_path):
  """A short run of the layout recipe on half of unet3d's measured configs ranks a quarter it never
  saw far better than chance (what the whole recipe reaches: benchmarks/results/real_layout.md)."""
  source = sample_data.require_sample("npz") / "layout/xla/default/train/unet3d.npz"
  graph = npz.read_graph(source)
  rows = config_split.write_config_split(graph, tmp_path / "npz", seed=0)
  # 40 steps, whose weights are averaged over the last ten or so, as the recipe's 1,000 over about 100.
  recipe = experiments.experiment("layout", "layout:xla:default").overridden(
      training={"epochs": 2, "steps_per_epoch": 20, "warmup_steps": 10, "weight_average": 0.9, "verbose": 0})
  run_experiment.train(recipe, tmp_path / "npz", tmp_path / "run")
  prediction, = predictions.read_predictions(tmp_path / "run/predictions.csv")
  assert sorted(prediction.ranking) == list(range(len(rows["test"])))
  scores = np.empty(len(rows["test"]))
  scores[list(prediction.ranking)] = np.arange(len(rows["test"]))
  assert metrics.kendall_tau(graph.config_runtime[rows["test"]], scores) > 0.5


def test_main_job_ranks_programs_it_never_saw(tmp_path):
  """One epoch of the main job's layout run on the generated xla train programs ranks the configs of
  the valid programs (other architectures, a video CNN among them) better than chance (random order:
  about 0); what the main job's full run reaches is in benchmarks/results/main_job.md. Each program at
  batch 1 in float32 only (the bfloat16 batch-4 twins, and the test split, would double what is
  converted and scored and add no architecture)."""
  for split in ("train", "valid"):
    (tmp_path / "npz/layout/xla/default" / split).mkdir(parents=True)
    for path in sorted((GENERATED_VALID.parent / split).glob("*.b1.f32.npz")):
      shutil.copy(path, tmp_path / "npz/layout/xla/default" / split)
  recipe = experiments.experiment("quickstart", "layout:xla:default").overridden(
      training={"epochs": 1, "warmup_steps": 20, "verbose": 0})
  result = run_experiment.train(recipe, tmp_path / "npz", tmp_path / "run")
  assert result["valid"]["graphs"] == 3 and result["valid"]["mean"]["kendall_tau"] > 0.08


def _trained_segments(model, graph_arrays, steps: int) -> list[int]:
  """The segment of 10 ops whose op features get gradients, per training step."""
  node_feat, edges, configurable, node_config_feat = graph_arrays
  features = tf.constant(node_feat)
  segments = []
  for _ in range(steps):
    with tf.GradientTape() as tape:
      tape.watch(features)
      graph = records.graph_tensor_from_arrays("layout", features, np.zeros(len(node_feat), np.uint8), edges,
                                               node_config_ids=configurable, node_config_feat=node_config_feat)
      loss = tf.reduce_sum(model(graph, training=True) ** 2)
    segments.append(int(np.flatnonzero(np.abs(tf.convert_to_tensor(tape.gradient(loss, features)).numpy()).sum(axis=1) > 0)[0] // 10))
  return segments


def test_segment_draws_resume_from_a_checkpoint_as_they_would_have_continued(tmp_path):
  arrays = _chain_program(num_nodes=200)
  graph = records.graph_tensor_from_arrays("layout", arrays[0], np.zeros(200, np.uint8), arrays[1],
                                           node_config_ids=arrays[2], node_config_feat=arrays[3])
  model = layout_model.build_layout_model(graph.spec, units=8, num_layers=1, segment_size=10)
  _trained_segments(model, arrays, 1)
  path = tf.train.Checkpoint(model=model).write(str(tmp_path / "checkpoint"))
  continued = _trained_segments(model, arrays, 5)
  restored = layout_model.build_layout_model(graph.spec, units=8, num_layers=1, segment_size=10)  # a new process's
  tf.train.Checkpoint(model=restored).read(path).assert_consumed()
  assert _trained_segments(restored, arrays, 5) == continued
  assert len(set(continued)) > 1


def test_layout_categories_sum_each_value_positions_table_row():
  values = np.random.default_rng(0).integers(-1, 6, size=(5, 3, 18)).astype(np.float32)
  categories = layout_model.LayoutCategories(4)
  summed = categories(tf.constant(values)).numpy()
  table = categories.weights[0].numpy().reshape(18, 7, 4)
  expected = sum(table[position, values[..., position].astype(int) + 1] for position in range(18))
  assert summed.shape == (5, 3, 4)
  np.testing.assert_allclose(summed, expected, rtol=1e-5, atol=1e-6)


def test_the_serving_path_distinct_rows_placed_by_gathers_scores_as_training_does():
  graph = npz.read_graph(GENERATED_VALID / "mobilenet.b1.f32.npz")
  tensor = layout_preprocessing.prune_to_configurable(records.graph_tensor_from_arrays(
      "layout", graph.node_feat, graph.node_opcode, graph.edge_index, node_config_ids=graph.node_config_ids,
      node_config_feat=graph.node_config_feat[:64]), 0).with_indices_dtype(tf.int32)
  model = layout_model.build_layout_model(tensor.spec, units=16, num_layers=1, context_layers=1)
  halves = layout_model.context_and_scores(model)
  context = halves.context(tensor)
  every_row = halves.config_scorer((tensor, context)).numpy()
  serving = halves.config_scorer((tensor, context), serving=True).numpy()
  rows = graph.node_config_feat[:64].reshape(-1, 18)
  slots = np.tile(np.arange(graph.node_config_ids.size), 64)
  assert np.unique(np.column_stack([slots, rows]), axis=0).shape[0] < rows.shape[0] / 2  # configs repeat rows
  np.testing.assert_array_equal(serving, every_row)
  np.testing.assert_array_equal(every_row, model(tensor).numpy())


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
