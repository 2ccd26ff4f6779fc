"""Scoring a trained model's predictions against measured runtimes (tpu_graphs/train/scoring.py)."""

import sys

import numpy as np
import pytest

import layout_test_data

from tpu_graphs.data import errors, npz
from tpu_graphs.train import scoring, tasks


def test_unmeasured_validation_graph_is_left_out_of_the_metrics_and_listed(tmp_path):
  path = tmp_path / "layout/xla/default/valid/unmeasured.npz"
  npz.write_npz(path, layout_test_data.small_layout_arrays(config_runtime=np.zeros(4, np.int64)))
  graph = npz.read_graph(path)  # accepted, with a warning
  scored = {"layout:xla:default:unmeasured": (graph.runtimes(), np.arange(4.0)),
            "layout:xla:default:measured": (np.array([4.0, 3, 2, 1]), np.array([3.0, 2, 1, 0]))}
  result = scoring.evaluate(tasks.LayoutTask(), scored)
  assert result["unmeasured"] == ["layout:xla:default:unmeasured"] and result["graphs"] == 1
  assert result["mean"]["kendall_tau"] == 1.0
  with pytest.raises(errors.InputError, match="no scored graph has a measured runtime"):
    scoring.evaluate(tasks.LayoutTask(), {"layout:xla:default:unmeasured": scored["layout:xla:default:unmeasured"]})



if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
