"""Small layout graphs built around given config features, for tests of layout statistics, and the
arrays of a tiny labelled layout file, for tests of what reads and scores one."""

import numpy as np

from tpu_graphs.data import graphs


def layout_graph(node_config_feat: np.ndarray, runtimes) -> graphs.LayoutGraph:
  """A validated layout:xla:random graph of nc unconnected ops, all configurable: a train graph, or
  a test graph when every runtime is 0 (the reader refuses unmeasured train graphs).

  Args:
    node_config_feat: (c, nc, 18) config features.
    runtimes: (c,) runtimes (zeros make it look unlabelled).
  """
  c, nc, _ = node_config_feat.shape
  arrays = {
      "node_feat": np.zeros((nc, graphs.NODE_FEATURE_WIDTH), np.float32),
      "node_opcode": np.ones(nc, np.uint8),
      "edge_index": np.zeros((0, 2), np.int64),
      "node_config_ids": np.arange(nc, dtype=np.int64),
      "node_config_feat": np.asarray(node_config_feat, np.float32),
      "config_runtime": np.asarray(runtimes, np.int64),
      "node_splits": np.array([[0]], np.int64),
  }
  split = "train" if np.any(arrays["config_runtime"] > 0) else "test"
  return graphs.validate_graph("built", "built", "layout:xla:random", split, arrays)


def small_layout_arrays(**replaced) -> dict:
  """A labelled layout graph of 4 ops (3 configurable) and 4 configs, with `replaced` arrays."""
  arrays = {"node_feat": np.zeros((4, graphs.NODE_FEATURE_WIDTH), np.float32), "node_opcode": np.ones(4, np.uint8),
            "edge_index": np.array([[1, 0], [2, 1], [3, 2]], np.int64), "node_config_ids": np.arange(3, dtype=np.int64),
            "node_config_feat": np.tile(np.array([0, 1, -1] * 6, np.float32), (4, 3, 1)),
            "config_runtime": np.array([4, 3, 2, 1], np.int64), "node_splits": np.array([[0]], np.int64)}
  return {**arrays, **replaced}
