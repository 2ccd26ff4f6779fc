"""Generated datasets: the format, test labels, and byte-identical regeneration of data/generated."""

import pathlib
import sys

import numpy as np
import pytest

from tpu_graphs.data import convert
from tpu_graphs.data import locations
from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.hlo import opcodes
from tpu_graphs.synth import generate

EMBEDDED = locations.EMBEDDED_ROOT


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
  """The whole embedded dataset generated again (about a minute on 2 idle cores)."""
  root = tmp_path_factory.mktemp("generated")
  files = generate.generate(root, "small", 0)
  return root, [item.path for item in files]


def tree_files(root):
  return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_regenerating_the_embedded_data_gives_identical_bytes(regenerated):
  root, files = regenerated
  if not (EMBEDDED / "npz").is_dir():
    pytest.skip(f"embedded dataset {EMBEDDED} not found")
  assert len(files) > 300
  assert tree_files(root) == tree_files(EMBEDDED)
  for relative in tree_files(root):
    assert (EMBEDDED / relative).read_bytes() == (root / relative).read_bytes(), relative


def test_every_collection_is_written_and_valid(regenerated):
  root, _ = regenerated
  rows = statistics.directory_statistics(root / "npz")
  assert {row.collection for row in rows} == set(statistics._COLLECTION_ORDER)
  for row in rows:
    if row.configurable_fraction_median is not None:
      assert 0.01 <= row.configurable_fraction_median <= 0.05


def test_test_files_are_unlabelled_and_their_labels_kept_beside(regenerated):
  root, _ = regenerated
  tests = sorted((root / "npz").rglob("test/*.npz"))
  assert tests
  for path in tests:
    graph = npz.read_graph(path)
    labels = np.load(root / "test_labels" / path.relative_to(root / "npz").with_suffix(".npy"))
    assert (graph.config_runtime == 0).all() and labels.shape[0] == graph.num_configs and labels.min() > 0


def test_tile_normalizer_is_the_default_configs_own_measurement(regenerated):
  root, _ = regenerated
  for path in sorted((root / "npz" / "tile").rglob("train/*.npz")):
    graph = npz.read_graph(path)
    normalizer = graph.config_runtime_normalizers[0]
    assert (graph.config_runtime_normalizers == normalizer).all()
    # Config 0 is the default; both are ~1%-noisy measurements of the same true runtime.
    assert abs(graph.config_runtime[0] / normalizer - 1) < 0.08


def test_default_search_changes_few_nodes_and_random_search_sets_all(regenerated):
  root, _ = regenerated
  default = npz.read_graph(root / "npz/layout/xla/default/test/unet.b1.f32.npz").node_config_feat
  random = npz.read_graph(root / "npz/layout/xla/random/test/unet.b1.f32.npz").node_config_feat
  explicit = (default != -1).any(-1)
  assert not explicit[0].any() and (explicit[1:].sum(-1) >= 1).all() and (explicit[1:].sum(-1) <= 3).all()
  assert (random != -1).any(-1).all()


def test_convolutions_and_dots_are_tile_kernels(regenerated):
  root, _ = regenerated
  matrix_ops = {opcodes.OPCODE_IDS["convolution"], opcodes.OPCODE_IDS["dot"]}
  kernels = [npz.read_graph(p) for p in sorted((root / "npz" / "tile").rglob("*.npz"))]
  matrix_kernels = [k for k in kernels if matrix_ops & set(k.node_opcode.tolist())]
  assert matrix_kernels
  # A convolution kernel's configs set a kernel tile (input, output features).
  convolution = opcodes.OPCODE_IDS["convolution"]
  assert any((k.config_feat[:, :2] > 0).all() for k in matrix_kernels if convolution in k.node_opcode)


def test_generated_files_convert_to_records(regenerated, tmp_path):
  root, _ = regenerated
  summary = convert.convert_directory(root / "npz", tmp_path / "records", progress=False)
  assert summary.graphs_written == len(list((root / "npz").rglob("*.npz")))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
