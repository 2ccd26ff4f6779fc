"""Memory plan and whole-graph training: a layout run whose plan exceeds the memory limit is refused
before any work, naming flags that fit; Graph Segment Training trains and scores a whole generated
program segment by segment, and its scores are the sums of its segments' scores."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import hang_guard
from tpu_graphs.data import graphs, npz, records
from tpu_graphs.models import layout_model, layout_preprocessing
from tpu_graphs.train import experiments, memory_plan, run_experiment

ROOT = pathlib.Path(__file__).resolve().parents[2]
NUM_OPS = 300


def _chain_layout_graph(split: str, num_configs: int, seed: int) -> graphs.LayoutGraph:
  """A chain of NUM_OPS ops with every 20th configurable; runtimes grow with the configs' values
  on the first configurable ops, so there is something to learn."""
  rng = np.random.default_rng(seed)
  configurable = np.arange(0, NUM_OPS, 20)
  config_feat = rng.integers(0, 3, (num_configs, configurable.size, 18)).astype(np.float32)
  runtimes = 1000 + (config_feat[:, :5, 0].sum(axis=1) * 50).astype(np.int64)
  arrays = {
      "node_feat": rng.uniform(0, 4, (NUM_OPS, graphs.NODE_FEATURE_WIDTH)).astype(np.float32),
      "node_opcode": rng.integers(1, 100, NUM_OPS).astype(np.uint8),
      "edge_index": np.stack([np.arange(1, NUM_OPS), np.arange(NUM_OPS - 1)], axis=1).astype(np.int64),
      "node_config_ids": configurable.astype(np.int64),
      "node_config_feat": config_feat,
      "config_runtime": runtimes if split != "test" else np.zeros(num_configs, np.int64),
      "node_splits": np.array([[0]], np.int64),
  }
  return graphs.validate_graph("built", "chain", "layout:xla:default", split, arrays)


@pytest.fixture(name="data_root")
def _data_root(tmp_path):
  for seed, split in enumerate(("train", "valid", "test")):
    npz.write_graph(tmp_path / "npz/layout/xla/default" / split / "chain.npz", _chain_layout_graph(split, 24, seed))
  return tmp_path / "npz"


def test_a_run_whose_plan_exceeds_the_limit_is_refused_before_any_work_naming_flags_that_fit(data_root, tmp_path):
  out_dir = tmp_path / "run"
  result = subprocess.run(
      [sys.executable, str(ROOT / "baselines/layout_train.py"), f"--data_root={data_root}", f"--out_dir={out_dir}",
       "--prune_hops=-1", "--segment_size=0", "--configs_per_graph=24", "--batch_size=64",
       f"--memory_limit_gb={memory_plan.BASE_BYTES / memory_plan.GIB + 1.0}"],
      capture_output=True, text=True, timeout=hang_guard.SECONDS, check=False)
  assert result.returncode != 0
  assert "refused before any work" in result.stderr
  assert "memory plan: peak" in result.stdout and f"{NUM_OPS} ops" in result.stdout
  assert "--prune_hops=1" in result.stderr and len(re.findall(r"--\w+=\d+ \(\d+\.\d+ GiB\)", result.stderr)) >= 2
  assert not out_dir.exists()  # nothing converted or written


def test_the_plan_counts_pruned_graphs_and_grows_with_what_a_step_holds(data_root):
  recipe = experiments.experiment("layout", "layout:xla:default")
  sizes, pruned = run_experiment.planned_memory(recipe, data_root)
  assert {graph.ops for graph in sizes["train"]} == {NUM_OPS // 20}  # 0 hops: the configurable ops
  whole = run_experiment.planned_memory(recipe.overridden(model={"prune_hops": None, "segment_size": 0}), data_root)[1]
  segmented = run_experiment.planned_memory(recipe.overridden(model={"prune_hops": None, "segment_size": 100}),
                                         data_root)[1]
  assert whole.largest.ops == NUM_OPS and whole.largest.edges == NUM_OPS - 1
  assert pruned.peak_bytes < segmented.peak_bytes < whole.peak_bytes
  assert whole.training_bytes == pytest.approx(segmented.training_bytes * NUM_OPS / 100, rel=0.02)


def test_whole_graph_segment_training_trains_and_scores_as_the_sum_of_its_segments(data_root, tmp_path):
  recipe = experiments.experiment("smallest", "layout:xla:default").overridden(
      training={"configs_per_graph": 8, "verbose": 0}, model={"prune_hops": None, "segment_size": 100})
  result = run_experiment.train(recipe, data_root, tmp_path / "run")
  assert result["valid"]["graphs"] == 1 and np.isfinite(result["valid"]["mean"]["kendall_tau"])
  assert (tmp_path / "run/predictions.csv").read_text().count("\n") == 2  # header and the test graph

  graph = _chain_layout_graph("valid", 6, 1)
  tensor = records.graph_tensor_from_arrays("layout", graph.node_feat, graph.node_opcode, graph.edge_index,
                                            node_config_ids=graph.node_config_ids,
                                            node_config_feat=graph.node_config_feat)
  model = layout_model.build_layout_model(tensor.spec, units=8, num_layers=2, segment_size=100)
  segmented = model.layers[-1]
  segment, _ = layout_preprocessing.op_segments(tensor, 100)
  summed = sum(segmented.scorer(layout_preprocessing.segment_subgraph(tensor, segment == index)).numpy()
               for index in range(NUM_OPS // 100))
  np.testing.assert_allclose(model(tensor).numpy(), summed, rtol=1e-4, atol=1e-3)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(tensor, training=True))
  assert all(gradient is not None for gradient in tape.gradient(loss, model.trainable_variables))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
