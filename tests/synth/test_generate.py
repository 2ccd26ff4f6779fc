"""Generated datasets: byte-identical regeneration of data/generated, and on the embedded data the
format, test labels and layout search like the real one. That every generated file converts to
records is checked on that same data by tests/programs/test_quickstart.py, whose main job converts all of it.

Regeneration covers six of the 22 architectures, one per source (xla, nlp) and split, among them
the 3-D convolutions, depthwise convolutions, attention and recurrence: every file draws from its
own seeded generator (generate.file_rng), so a file comes out the same whether it is generated alone
or with the rest, and the properties below are checked on every embedded file."""

import functools
import pathlib
import sys

import numpy as np
import pytest

from tpu_graphs.data import graphs
from tpu_graphs.analysis import layout_search, ridge
from tpu_graphs.data import locations
from tpu_graphs.data import npz
from tpu_graphs.data import statistics
from tpu_graphs.hlo import features
from tpu_graphs.hlo import opcodes
from tpu_graphs.synth import generate
from tpu_graphs.train import metrics

EMBEDDED = locations.EMBEDDED_ROOT


# One architecture per source and split (generate.SPLIT_OF_ARCHITECTURE).
REGENERATED_ARCHITECTURES = ["unet3d_small", "mobilenet", "unet", "transformer_encoder", "mlp_mixer", "lstm"]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
  """REGENERATED_ARCHITECTURES' files of the embedded dataset generated again."""
  root = tmp_path_factory.mktemp("generated")
  files = generate.generate(root, "small", 0, architectures=REGENERATED_ARCHITECTURES)
  return root, [item.path for item in files]


@pytest.fixture(scope="module")
def embedded():
  if not (EMBEDDED / "npz").is_dir():
    pytest.skip(f"embedded dataset {EMBEDDED} not found")
  return EMBEDDED


def data_files(root, architectures=None):
  """The data and label files under root (the README, which lists the programs, left out), of
  `architectures` only where given (files are named <architecture>.b<batch>.<dtype>[.<kernel>])."""
  return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.parent != root
                and (architectures is None or p.name.split(".")[0] in architectures))


def test_regenerating_the_embedded_data_gives_identical_bytes(regenerated, embedded):
  root, files = regenerated
  assert {generate.SPLIT_OF_ARCHITECTURE[name] for name in REGENERATED_ARCHITECTURES} == {"train", "valid", "test"}
  assert len(files) > 60
  assert data_files(root) == data_files(embedded, REGENERATED_ARCHITECTURES)
  for relative in data_files(root):
    assert (embedded / relative).read_bytes() == (root / relative).read_bytes(), relative


def test_the_embedded_data_holds_every_architecture_of_the_generator(embedded):
  written = {pathlib.Path(relative).name.split(".")[0] for relative in data_files(embedded)}
  assert written == set(generate.SPLIT_OF_ARCHITECTURE)


def test_every_collection_is_written_and_valid(embedded):
  root = embedded
  rows = statistics.directory_statistics(root / "npz")
  assert {row.collection for row in rows} == set(graphs.COLLECTIONS)
  for row in rows:
    if row.configurable_fraction_median is not None:  # the real sample's layout files: 1.6% to 7.8%
      assert 0.01 <= row.configurable_fraction_median <= 0.15, row


def test_test_files_are_unlabelled_and_their_labels_kept_beside(embedded):
  root = embedded
  tests = sorted((root / "npz").rglob("test/*.npz"))
  assert tests
  for path in tests:
    graph = npz.read_graph(path)
    labels = np.load(root / "test_labels" / path.relative_to(root / "npz").with_suffix(".npy"))
    assert (graph.config_runtime == 0).all() and labels.shape[0] == graph.num_configs and labels.min() > 0


def test_tile_normalizer_is_the_default_configs_own_measurement(embedded):
  """Config 0 is the default; it and the normalizer are two measurements of one true runtime, each
  with the machine's 0.2% noise, so their ratio spreads by sqrt(2) x 0.2% = 0.28% about 1."""
  root = embedded
  ratios, normalizers = [], []
  for path in sorted((root / "npz" / "tile").rglob("train/*.npz")):
    graph = npz.read_graph(path)
    normalizer = graph.config_runtime_normalizers[0]
    assert (graph.config_runtime_normalizers == normalizer).all()
    # 0.015: over 5 spreads, with room for rounding to whole nanoseconds (up to 0.5% on ~100 ns kernels).
    assert abs(graph.config_runtime[0] / normalizer - 1) < 0.015, path
    ratios.append(graph.config_runtime[0] / normalizer)
    normalizers.append(normalizer)
  measured_apart = np.asarray(ratios)[np.asarray(normalizers) >= 1000]  # where whole nanoseconds are fine enough
  assert len(measured_apart) > 100 and 0.0020 < np.std(measured_apart) < 0.0040, np.std(measured_apart)


def _default_rows(node_config_feat: np.ndarray) -> np.ndarray:
  """(nc, 18): each node's row with every tensor it sets at its default (descending) layout, of
  which configs set the CONFIGURED_LAYOUT_DIMS minor-most dims. A tensor's rank is one more than the
  largest dim any config sets for it: each of its candidates has the last dim among its two
  minor-most."""
  slots = node_config_feat.reshape(node_config_feat.shape[:2] + (features.LAYOUT_MAX_TENSORS, features.LAYOUT_MAX_DIMS))
  last = slots.max(axis=(0, 3))[..., np.newaxis]  # (nc, 3, 1): rank - 1, -1 for a tensor not set
  dims = np.arange(features.LAYOUT_MAX_DIMS)
  return np.where((dims < features.CONFIGURED_LAYOUT_DIMS) & (dims <= last), last - dims, -1).reshape(len(slots[0]), -1)


@functools.cache
def _search_statistics(path: pathlib.Path) -> layout_search.LayoutSearchStatistics:
  """layout_search_statistics of one generated file, computed once: the tests below read the same
  train files several times."""
  return layout_search.layout_search_statistics(npz.read_graph(path))


def _layout_files(root, search, split="train"):
  return sorted((root / "npz" / "layout").glob(f"*/{search}/{split}/*.npz"))


def test_default_search_starts_at_the_compilers_layouts_and_every_config_sets_the_minor_dims_of_every_node(embedded):
  # As in the real default collections: the first config is the compiler's own, which strays
  # from the as-written layouts the search's other configs mostly keep.
  root = embedded
  for path in _layout_files(root, "default", "test"):
    feat = npz.read_graph(path).node_config_feat
    as_written = (feat == _default_rows(feat)).all(-1)  # (c, nc)
    assert not as_written[0].all() and as_written[1:].mean() > 0.5, path
  for path in _layout_files(root, "default", "test") + _layout_files(root, "random", "test"):
    slots = npz.read_graph(path).node_config_feat.reshape(-1, features.LAYOUT_MAX_DIMS)
    assert (slots != -1).reshape(-1, features.LAYOUT_MAX_TENSORS * features.LAYOUT_MAX_DIMS).any(-1).all(), path
    assert (slots[:, features.CONFIGURED_LAYOUT_DIMS:] == -1).all(), path


def test_straying_from_the_common_layouts_is_not_slow_as_such_and_single_ops_can_dominate(embedded):
  # Real default search: the Kendall tau of runtime against the ops a config puts off their
  # most common layout is -0.17 and 0.04; one op of the real unet3d moves it 3.03x.
  root = embedded
  for source in ("xla", "nlp"):
    taus = []
    for path in sorted((root / "npz" / "layout" / source / "default" / "train").glob("*.npz")):
      taus.append(metrics.kendall_tau(npz.read_graph(path).runtimes(), _search_statistics(path).off_modal_ops))
    assert -0.25 <= np.median(taus) <= 0.15, (source, taus)
    for search in ("default", "random"):
      effects = [_search_statistics(path).largest_op_effect
                 for path in sorted((root / "npz" / "layout" / source / search / "train").glob("*.npz"))]
      assert max(effects) >= 1.5, (source, search, effects)


def test_every_configurable_node_has_two_to_eight_candidate_layouts_including_the_default(embedded):
  root = embedded
  for path in _layout_files(root, "random"):
    feat = npz.read_graph(path).node_config_feat
    _, counts = layout_search.node_layout_categories(feat)
    assert counts.min() >= 2 and counts.max() <= 8, path
    # 1,000 uniform draws from at most 8 candidates take every one, the default among them.
    assert (feat == _default_rows(feat)).all(-1).any(0).all(), path


@pytest.mark.parametrize("search, modal_range", [("default", (0.40, 0.80)), ("random", (0.15, 0.45))])
def test_layout_search_looks_like_real_layout_search(embedded, search, modal_range):
  # On each train split: few layouts per node, how often a node keeps its most common one as in
  # the real default or random collections, and runtimes mostly per-node layout effects.
  root = embedded
  for source in ("xla", "nlp"):
    found, taus = [], []
    for path in sorted((root / "npz" / "layout" / source / search / "train").glob("*.npz")):
      found.append(_search_statistics(path))
      taus.append(ridge.per_node_layout_ridge_tau(npz.read_graph(path)))
    assert found, source
    assert np.median([f.distinct_layouts for f in found]) <= 12, source
    assert modal_range[0] <= np.median([f.modal_fraction for f in found]) <= modal_range[1], source
    assert np.median(taus) >= 0.40, source


def test_convolutions_and_dots_are_tile_kernels(embedded):
  root = embedded
  matrix_ops = {opcodes.OPCODE_IDS["convolution"], opcodes.OPCODE_IDS["dot"]}
  kernels = [npz.read_graph(p) for p in sorted((root / "npz" / "tile").rglob("*.npz"))]
  matrix_kernels = [k for k in kernels if matrix_ops & set(k.node_opcode.tolist())]
  assert matrix_kernels
  # A convolution kernel's configs set a kernel tile (input, output features).
  convolution = opcodes.OPCODE_IDS["convolution"]
  assert any((k.config_feat[:, :2] > 0).all() for k in matrix_kernels if convolution in k.node_opcode)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
