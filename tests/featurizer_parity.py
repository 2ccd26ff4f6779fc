"""Both featurizers on one input: the npz files //native:featurize writes (a fresh process) against
the Python featurizer's graphs, for tests/native/test_native_featurizer.py and tests/native/test_native_zoo.py."""

import pathlib
import subprocess

import numpy as np

import bazel_outputs
import hang_guard
from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates, featurize, hlo_input


def native_graphs(path: pathlib.Path, output_dir: pathlib.Path, *flags: str) -> dict[str, dict[str, np.ndarray]]:
  """graph id -> arrays of the npz files //native:featurize writes for `path`."""
  completed = subprocess.run([str(bazel_outputs.built("native/tools/featurize")), f"--input={path}",
                              f"--output_dir={output_dir}", *flags],
                             capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert completed.returncode == 0, completed.stderr
  written = {}
  for line in completed.stdout.splitlines():
    with np.load(line.split("  ")[0]) as arrays:
      written[pathlib.Path(line.split("  ")[0]).stem] = {name: arrays[name] for name in arrays.files}
  return written


def python_graphs(path: pathlib.Path, *flags: str) -> dict[str, dict[str, np.ndarray]]:
  """graph id -> arrays the Python featurizer gives for `path` under the same flags."""
  proto = hlo_input.read_hlo_file(path)
  kernels = "--kernels" in flags
  asked = dict(flag[2:].split("=") for flag in flags if "=" in flag)
  if "num_candidates" in asked:
    found = candidates.candidate_graphs(proto, int(asked["num_candidates"]), kernels, int(asked.get("seed", 0)),
                                        str(path), change_entry_layouts="--change_entry_layouts" in flags)
  else:
    found = featurize.graphs_of_proto(proto, kernels, str(path))
  return {graph.graph_id.replace("/", "_"): graphs.graph_arrays(graph) for graph in found}


def assert_featurized_alike(path: pathlib.Path, output_dir: pathlib.Path, *flags: str) -> None:
  """Both featurizers give `path` (under //native:featurize's `flags`) the same graphs: the same
  arrays in the same order, of the same dtypes and shapes, byte for byte."""
  native, python = native_graphs(path, output_dir, *flags), python_graphs(path, *flags)
  assert sorted(native) == sorted(python)
  for graph_id, arrays in python.items():
    assert list(native[graph_id]) == list(arrays), graph_id
    for name, expected in arrays.items():
      got = native[graph_id][name]
      assert (got.dtype, got.shape) == (expected.dtype, expected.shape), (graph_id, name)
      # Bit-identical: float32 compared by their bytes, not their values.
      assert got.tobytes() == np.ascontiguousarray(expected).tobytes(), (graph_id, name)
