"""The model without Python (native/, docs/compiler.md): tile and layout models compiled into C
libraries (baselines/compile_native.py) and the SavedModel through TensorFlow's C API, both driven
by the native ranker (//native:rank, a fresh process), rank real sample files as the Python
SavedModel does; given a module (--hlo: XLA's own dumps, tuning data with or without runs), they
rank its candidates as baselines/rank.py does, saying what each best config sets, and the
library's one C call (tpu_graphs_rank_module) answers from C, from many threads at once. The module
written back (tpu_graphs_apply_layout_config, rank and rank.py --write_module) is the same bytes
everywhere (tpu_graphs/hlo/module_writer.py's), and XLA itself (the TensorFlow wheel's, through
tests/native/xla_parse_module.cc) reads and verifies it. Built
again with sanitizers (native_library.relink, g++), the libraries replay every input their fuzz
targets found a problem with (native/fuzz/regressions/) under AddressSanitizer and
UndefinedBehaviorSanitizer, and answer threads scoring different graphs and ranking a module at
once as one thread under ThreadSanitizer.

Under Bazel the ranker, the XLA AOT runtime archive and the compiled model libraries (the shared
fixtures tile_library and layout_library, tests/shared_fixtures.py) are this test's data; run
directly, the test uses bazel-bin/ (bazel build //native:all //tests:all).
"""

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

import bazel_outputs
import hang_guard
import malformed_modules
import sample_data
import shared_fixtures
from tpu_graphs.data import errors, graphs, locations, npz
from benchmarks import untrained
from tpu_graphs.export import ranker, saved_model
from tpu_graphs.export.aot import layout_shapes, native_library, signatures, tile_shapes
from tpu_graphs.hlo import module_writer, tuning_pb2, xla_dumps
from tpu_graphs.models import tile_model
from tpu_graphs.train import run_directory

REAL_TILE_FILES = ("npz/tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz",
                   "npz/tile/xla/test/0a3585c3e686065389227fa374175e48.npz",  # 52 ops, 1,282 configs
                   "npz/tile/xla/test/0ac539372cc77cc6791794b369b984e1.npz")  # 65 ops, 2,951 configs
REAL_LAYOUT_FILES = ("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz",
                     "npz/layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz")  # 21,918 ops
TOP = 5
LAYOUT_PB = "pb/official_testdata/module_tuning_data_layout.pb"
TILE_PB = "pb/official_testdata/op_tuning_data.pb"  # TuningData of 15 kernels
RANK_PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "rank.py"
FUZZ_DIR = native_library.NATIVE_SOURCES / "fuzz"
# g++'s sanitizers, as native/sanitizers.bzl builds the native code with them.
ADDRESS_SANITIZER = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
THREAD_SANITIZER = ["-fsanitize=thread"]


@pytest.fixture(scope="module")
def tile_export(tmp_path_factory):
  """A trained tile run's export with its native library compiled (export/native/)."""
  return shared_fixtures.unpack("tile_library", tmp_path_factory.mktemp("tile")) / "export"


def _rank(mode: str, export_dir, path, json_path, environment=None) -> subprocess.CompletedProcess:
  """//native:rank on one npz file; `environment` adds variables (TPU_GRAPHS_CPU_LEVEL, TPU_GRAPHS_NUM_THREADS)."""
  return subprocess.run([str(bazel_outputs.built("native/tools/rank")), f"--mode={mode}", f"--model={export_dir}",
                         f"--input={path}", f"--top={TOP}", f"--json={json_path}"],
                        capture_output=True, text=True, timeout=hang_guard.SECONDS, check=False,
                        env={**os.environ, **(environment or {})})


def _python_scores(export_dir, graph: graphs.Graph) -> np.ndarray:
  """The Python SavedModel's scores of every config (the plain signature, as baselines/rank.py calls it)."""
  serve = tf.saved_model.load(str(export_dir)).signatures[saved_model.PLAIN_SIGNATURE]
  config_arrays = {"config_feat": graph.config_feat} if isinstance(graph, graphs.TileGraph) else {
      "node_config_ids": graph.node_config_ids, "node_config_feat": graph.node_config_feat}
  return serve(node_feat=graph.node_feat, node_opcode=graph.node_opcode, edge_index=graph.edge_index,
               **config_arrays)["scores"].numpy()


def _assert_same_ranking(written: pathlib.Path, graph: graphs.Graph, expected: np.ndarray) -> None:
  """The JSON of baselines/rank.py --json; every listed score within 1e-4 relative of the Python
  SavedModel's, and the listed configs its best, except where scores tie within that tolerance."""
  [entry] = json.loads(written.read_text())
  assert (entry["id"], entry["collection"], entry["num_configs"]) == (graph.graph_id, graph.collection, expected.size)
  best = [item["config"] for item in entry["best"]]
  scores = np.array([item["score"] for item in entry["best"]])
  tolerance = 1e-4 * np.abs(expected).max()
  np.testing.assert_allclose(scores, expected[best], rtol=1e-4, atol=tolerance)
  cutoff = np.sort(expected)[len(best) - 1]
  assert len(best) == min(TOP, expected.size) and all(expected[i] <= cutoff + tolerance for i in best)
  assert np.all(np.diff(scores) >= 0)


@pytest.mark.parametrize("relative", REAL_TILE_FILES)
@pytest.mark.parametrize("mode", ["aot", "capi"])
def test_both_modes_rank_real_tile_files_as_the_python_saved_model(tile_export, relative, mode, tmp_path):
  path = sample_data.require_sample(relative)
  graph = npz.read_graph(path)
  result = _rank(mode, tile_export, path, tmp_path / "best.json")
  assert result.returncode == 0, result.stderr
  _assert_same_ranking(tmp_path / "best.json", graph, _python_scores(tile_export, graph))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_compiled_tile_library_ranks_as_the_python_saved_model_with_and_without_its_helper_thread(
    tile_export, threads, tmp_path):
  """One thread: a call's programs all run on it; two: the helper thread takes chunks of configs'
  halves while the caller runs the kernel's half (a real kernel of many chunks of 128 configs)."""
  path = sample_data.require_sample(REAL_TILE_FILES[2])
  graph = npz.read_graph(path)
  assert graph.config_feat.shape[0] > 4 * tile_shapes.CONFIGS_PER_CALL
  result = _rank("aot", tile_export, path, tmp_path / "best.json", {"TPU_GRAPHS_NUM_THREADS": threads})
  assert result.returncode == 0, result.stderr
  _assert_same_ranking(tmp_path / "best.json", graph, _python_scores(tile_export, graph))


def test_an_export_without_static_signatures_outside_a_run_directory_is_refused_naming_config_json(tmp_path):
  export_dir = untrained.export_untrained("tile:xla", tmp_path, units=16, layers=1)  # <tmp_path>/tile: no config.json
  with pytest.raises(run_directory.RunDirectoryError, match=f"{tmp_path / 'config.json'}: not found"):
    native_library.compile_model_library(export_dir, bazel_outputs.built("native/libxla_aot_runtime.a").parent)
  assert not (export_dir / native_library.NATIVE_DIR_NAME).exists()


def _linked_and_exported(export_dir) -> tuple[str, list[str]]:
  """What ldd lists for an export's compiled library, and the tpu_graphs symbols it exports."""
  library = export_dir / "native" / native_library.LIBRARY_NAME
  linked = subprocess.run(["ldd", str(library)], capture_output=True, text=True, check=True).stdout
  exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                            check=True).stdout.split()
  return linked, sorted(name for name in exported if name.startswith("tpu_graphs"))


def test_a_library_is_kept_while_its_weights_are_and_compiled_again_for_new_ones(tile_export, tmp_path):
  export_dir = tmp_path / "export"
  shutil.copytree(tile_export, export_dir)
  library = export_dir / "native" / native_library.LIBRARY_NAME
  compiled = library.read_bytes()
  assert native_library.compile_again_if_stale(export_dir) is None and library.read_bytes() == compiled
  # Recorded as compiled for one CPU level, so that the compilation below is one level's.
  listed = export_dir / "native" / "buckets.json"
  listed.write_text(json.dumps({**json.loads(listed.read_text()), "cpus": ["x86-64"]}))
  other = untrained.export_untrained("tile:xla", tmp_path / "other", seed=1, units=16, layers=2,
                                     static_signatures=True)
  for part in other.iterdir():  # an export of other weights, native/ carried over as saved_model.export keeps it
    shutil.rmtree(export_dir / part.name) if (export_dir / part.name).is_dir() else (export_dir / part.name).unlink()
    shutil.move(part, export_dir / part.name)
  assert native_library.compile_again_if_stale(export_dir) == library
  recorded = json.loads((export_dir / "native" / "buckets.json").read_text())
  assert recorded["weights"] == saved_model.weights_fingerprint(export_dir) != saved_model.weights_fingerprint(tile_export)
  assert recorded["cpus"] == ["x86-64"] and library.read_bytes() != compiled


def test_compiled_library_links_no_tensorflow_and_exports_only_the_c_interface(tile_export):
  linked, exported = _linked_and_exported(tile_export)
  assert "libstdc++" in linked and "libprotobuf-lite" in linked and "tensorflow" not in linked
  assert exported == ["tpu_graphs_apply_layout_config", "tpu_graphs_free_module_ranking",
                      "tpu_graphs_free_written_module", "tpu_graphs_rank_module", "tpu_graphs_score_tile",
                      "tpu_graphs_tile_limits"]
  compiled = json.loads((tile_export / "native" / "buckets.json").read_text())["buckets"]
  assert [b["signature"] for b in compiled] == [b.signature_name for b in tile_shapes.SPLIT_TILE_BUCKETS]


def test_an_early_join_model_compiles_in_whole_buckets_and_ranks_as_its_saved_model(tmp_path):
  # Only a late-join model splits into halves; any other tile model is one program per bucket.
  tf.keras.utils.set_random_seed(0)
  scorer = tile_model.build_tile_model(saved_model.model_input_spec("tile"), "early", units=8, num_layers=1)
  export_dir = tmp_path / "export"
  saved_model.export(scorer, "tile", export_dir, static_functions=signatures.static_functions)
  steps = []
  native_library.compile_model_library(export_dir, bazel_outputs.built("native/libxla_aot_runtime.a").parent,
                                       cpus=["x86-64"], progress=lambda *step: steps.append(step))
  assert steps == [(1, 3, f"tfcompile {len(tile_shapes.TILE_BUCKETS)} bucket(s), 1 CPU level(s)"), (2, 3, "link"),
                   (3, 3, "linked")]  # what compile_native.py's progress bar shows
  compiled = json.loads((export_dir / "native" / "buckets.json").read_text())["buckets"]
  assert [b["signature"] for b in compiled] == [b.signature_name for b in tile_shapes.TILE_BUCKETS]
  path = sample_data.require_sample(REAL_TILE_FILES[0])
  result = _rank("aot", export_dir, path, tmp_path / "best.json")
  assert result.returncode == 0, result.stderr
  graph = npz.read_graph(path)
  _assert_same_ranking(tmp_path / "best.json", graph, _python_scores(export_dir, graph))


@pytest.fixture(scope="module")
def layout_library(tmp_path_factory):
  """A layout model's export that prunes graphs to their configurable ops and 1-hop neighbours, with
  its native library compiled: host-side pruning, then the static layout signatures."""
  return shared_fixtures.unpack("layout_library", tmp_path_factory.mktemp("layout")) / "export"


@pytest.fixture(scope="module")
def layout_python_scores(layout_library):
  """The Python SavedModel's scores of each real layout file (relative path -> scores), once per module."""
  scores = {}

  def of(relative: str) -> tuple[graphs.Graph, np.ndarray]:
    graph = npz.read_graph(sample_data.require_sample(relative))
    if relative not in scores:
      scores[relative] = _python_scores(layout_library, graph)
    return graph, scores[relative]
  return of


@pytest.mark.parametrize("relative, configs", [(REAL_LAYOUT_FILES[0], None), (REAL_LAYOUT_FILES[1], 128)])
def test_c_api_ranks_real_layout_files_as_the_python_saved_model(layout_library, layout_python_scores, relative,
                                                                 configs, tmp_path):
  """unet_3d.4x4.bf16 with every config; the 21,918-op nlp graph with its first `configs` (both sides
  score each config of the whole graph; all 1,000 of them cost a minute and check nothing more)."""
  if configs is None:
    graph, expected = layout_python_scores(relative)
    path = sample_data.require_sample(relative)
  else:
    whole = npz.read_graph(sample_data.require_sample(relative))
    graph = dataclasses.replace(whole, node_config_feat=whole.node_config_feat[:configs],
                                config_runtime=whole.config_runtime[:configs])
    path = tmp_path / relative  # the collection is read from the path
    npz.write_graph(path, graph)
    expected = _python_scores(layout_library, graph)
  result = _rank("capi", layout_library, path, tmp_path / "best.json")
  assert result.returncode == 0, result.stderr
  _assert_same_ranking(tmp_path / "best.json", graph, expected)


@pytest.mark.parametrize("level", native_library.CPUS)
@pytest.mark.parametrize("threads", ["1", "3"])
def test_compiled_layout_library_prunes_and_ranks_the_real_unet_3d_file_as_the_python_saved_model(
    layout_library, layout_python_scores, level, threads, tmp_path):
  """Every compiled CPU level (TPU_GRAPHS_CPU_LEVEL picks one) and any number of threads over the
  config chunks score alike."""
  graph, expected = layout_python_scores(REAL_LAYOUT_FILES[0])
  result = _rank("aot", layout_library, sample_data.require_sample(REAL_LAYOUT_FILES[0]), tmp_path / "best.json",
                 {"TPU_GRAPHS_CPU_LEVEL": level, "TPU_GRAPHS_NUM_THREADS": threads})
  if f"TPU_GRAPHS_CPU_LEVEL={level} names no level" in result.stderr:
    pytest.skip(f"this CPU does not run {level} code")
  assert result.returncode == 0, result.stderr
  _assert_same_ranking(tmp_path / "best.json", graph, expected)


def test_compiled_layout_library_refuses_a_cpu_level_it_was_not_compiled_for(layout_library, tmp_path):
  result = _rank("aot", layout_library, sample_data.require_sample(REAL_LAYOUT_FILES[0]), tmp_path / "best.json",
                 {"TPU_GRAPHS_CPU_LEVEL": "x86-64-v2"})
  assert (result.returncode, result.stdout) == (1, ""), result.stderr
  assert ("TPU_GRAPHS_CPU_LEVEL=x86-64-v2 names no level this library was compiled for (x86-64, x86-64-v3, "
          "x86-64-v4) that this CPU runs") in result.stderr


def test_compiled_layout_library_refuses_a_real_graph_over_its_largest_bucket(layout_library, tmp_path):
  """The nlp graph's 1-hop neighbourhood keeps 2,850 ops joined by 51,209 edges: more than 8,192."""
  result = _rank("aot", layout_library, sample_data.require_sample(REAL_LAYOUT_FILES[1]), tmp_path / "best.json")
  assert (result.returncode, result.stdout) == (1, ""), result.stderr
  assert ("(status 1): the graph pruned to its configurable ops and their 1-hop neighbourhood has 2850 ops, 51209 "
          "edges and 848 configurable ops; this model was compiled for at most 4096 ops, 8192 edges") in result.stderr


def test_compiled_layout_library_links_no_tensorflow_and_exports_only_the_layout_interface(layout_library):
  linked, exported = _linked_and_exported(layout_library)
  assert "libstdc++" in linked and "libprotobuf-lite" in linked and "tensorflow" not in linked
  assert exported == ["tpu_graphs_apply_layout_config", "tpu_graphs_free_module_ranking",
                      "tpu_graphs_free_written_module", "tpu_graphs_layout_limits", "tpu_graphs_rank_module",
                      "tpu_graphs_score_layout"]
  compiled = json.loads((layout_library / "native" / "buckets.json").read_text())
  assert compiled["kind"] == "layout" and [b["signature"] for b in compiled["buckets"]] == [
      b.signature_name for b in layout_shapes.layout_buckets(1)]
  assert compiled["cpus"] == list(native_library.CPUS)


def _layout_file(folder: pathlib.Path, nodes: int = 6, configurable=(1, 3), **replaced) -> pathlib.Path:
  """A layout npz under folder/layout/xla/default/test/ with a chain of `nodes` ops, the given
  configurable ops and 3 configs, arrays replaced as given."""
  configurable = np.asarray(configurable, np.int64)
  arrays = {"node_feat": np.ones([nodes, graphs.NODE_FEATURE_WIDTH], np.float32),
            "node_opcode": (np.arange(nodes) % 200).astype(np.uint8),
            "edge_index": np.stack([np.arange(1, nodes), np.arange(nodes - 1)], 1).astype(np.int64),
            "node_config_ids": configurable,
            "node_config_feat": np.random.default_rng(0).integers(
                -1, 6, [3, configurable.size, graphs.LAYOUT_CONFIG_FEATURE_WIDTH]).astype(np.float32), **replaced}
  arrays.update(config_runtime=np.zeros([len(arrays["node_config_feat"])], np.int64),
                node_splits=np.zeros([1, 0], np.int64))
  path = folder / "layout" / "xla" / "default" / "test" / "graph.npz"
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(path, **arrays)
  return path


_LARGEST_NODES, _, _LARGEST_CONFIGURABLE, _ = layout_shapes.LAYOUT_SIZES[-1]
_HUB_EDGES = layout_shapes.NEIGHBOUR_SLOTS + 1  # more edges than a neighbour table's row holds: a hub


def _fan_outs(producers: int) -> np.ndarray:
  """edge_index of ops 0..producers-1 each feeding _HUB_EDGES ops of their own (after them)."""
  consumers = producers + np.arange(producers * _HUB_EDGES)
  return np.stack([consumers, np.repeat(np.arange(producers), _HUB_EDGES)], 1)


@pytest.mark.parametrize("replaced, message", [
    ({"nodes": _LARGEST_CONFIGURABLE + 1, "configurable": np.arange(_LARGEST_CONFIGURABLE + 1)},
     f"has {_LARGEST_CONFIGURABLE + 1} ops, {_LARGEST_CONFIGURABLE} edges and {_LARGEST_CONFIGURABLE + 1} "
     "configurable ops; this model was compiled for at most"),
    ({"nodes": _LARGEST_NODES + 2, "configurable": np.arange(_LARGEST_NODES + 1)},
     f"1-hop neighbourhood keeps {_LARGEST_NODES + 2} ops; this model was compiled for at most {_LARGEST_NODES} ops"),
    ({"node_config_feat": np.full([3, 2, 18], np.nan, np.float32)}, "node_config_feat holds nan (config 0"),
    ({"node_config_feat": np.full([3, 2, 18], 7, np.float32)}, "node_config_feat holds 7 (config 0"),
    ({"node_config_ids": np.array([1, 9])}, "node_config_ids entry 1 names op 9, outside [0, 6)"),
    ({"node_config_ids": np.array([3, 3])}, "node_config_ids lists op 3 more than once"),
    ({"edge_index": np.array([[1, 0], [0, 1]])}, "edge_index has a cycle"),
    ({"edge_index": np.array([[1, 0], [6, 2]])}, "edge_index row 1 names op 6, outside [0, 6)"),
    ({"nodes": (layout_shapes.HUB_ROWS + 1) * (_HUB_EDGES + 1), "configurable": np.arange(layout_shapes.HUB_ROWS + 1),
      "edge_index": _fan_outs(layout_shapes.HUB_ROWS + 1)},
     f"the pruned graph has {layout_shapes.HUB_ROWS + 1} ops with more than {layout_shapes.NEIGHBOUR_SLOTS} consumers "
     f"each; this model was compiled for at most {layout_shapes.HUB_ROWS} such ops"),
])
def test_compiled_layout_library_refuses_bad_input_naming_the_problem(layout_library, tmp_path, replaced, message):
  path = _layout_file(tmp_path, **replaced)
  result = _rank("aot", layout_library, path, tmp_path / "best.json")
  assert (result.returncode, result.stdout) == (1, ""), result.stderr
  assert message in result.stderr and not (tmp_path / "best.json").exists()


@pytest.mark.parametrize("replaced", [
    {"nodes": 9, "configurable": (7, 2)},  # fewer configs than a chunk, an op pruning drops
    # Op 0 feeds ops 1.._HUB_EDGES, which all feed the last op: a hub each way.
    {"nodes": _HUB_EDGES + 2, "configurable": (0, 3, _HUB_EDGES + 1), "edge_index": np.concatenate(
        [_fan_outs(1), np.stack([np.full(_HUB_EDGES, _HUB_EDGES + 1), np.arange(1, _HUB_EDGES + 1)], 1)])},
])
def test_compiled_layout_library_scores_a_small_graph_as_the_python_saved_model(layout_library, tmp_path, replaced):
  path = _layout_file(tmp_path, **replaced)
  result = _rank("aot", layout_library, path, tmp_path / "best.json")
  assert result.returncode == 0, result.stderr
  graph = npz.read_graph(path)
  _assert_same_ranking(tmp_path / "best.json", graph, _python_scores(layout_library, graph))


def _tile_file(folder: pathlib.Path, nodes: int = 4, **replaced) -> pathlib.Path:
  """A tile npz under folder/tile/xla/test/ with a chain of `nodes` ops, arrays replaced as given."""
  arrays = {"node_feat": np.ones([nodes, graphs.NODE_FEATURE_WIDTH], np.float32),
            "node_opcode": (np.arange(nodes) % 200).astype(np.uint8),
            "edge_index": np.stack([np.arange(1, nodes), np.arange(nodes - 1)], 1).astype(np.int64),
            "config_feat": np.ones([3, graphs.TILE_CONFIG_FEATURE_WIDTH], np.float32), **replaced}
  configs = len(arrays["config_feat"])
  arrays.update(config_runtime=np.zeros([configs], np.int64), config_runtime_normalizers=np.ones([configs], np.int64))
  path = folder / "tile" / "xla" / "test" / "kernel.npz"
  path.parent.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(path, **arrays)
  return path


@pytest.mark.parametrize("replaced, modes, message", [
    ({"nodes": 600}, ["aot"], "the kernel has 600 ops and 599 edges; this model was compiled for at most 512 ops"),
    ({"config_feat": np.full([3, 24], np.nan, np.float32)}, ["aot", "capi"], "config_feat holds NaN or infinite"),
    ({"edge_index": np.array([[1, 0], [9, 2]])}, ["aot"], "edge_index row 1 names op 9, outside"),
    ({"edge_index": np.array([[1, 0], [9, 2]])}, ["capi"], "edge_index holds a node index >= the number of nodes"),
    ({"node_opcode": np.zeros([4], np.int32)}, ["aot", "capi"], "'node_opcode' must be |u1"),
])
def test_bad_input_gets_an_error_naming_the_problem(tile_export, tmp_path, replaced, modes, message):
  path = _tile_file(tmp_path, **replaced)
  for mode in modes:
    result = _rank(mode, tile_export, path, tmp_path / "best.json")
    assert (result.returncode, result.stdout) == (1, ""), result.stderr
    assert message in result.stderr and not (tmp_path / "best.json").exists()


def test_a_module_given_as_an_npz_input_is_refused_saying_it_goes_to_hlo(tile_export, tmp_path):
  path = tmp_path / "module.pb"
  path.write_bytes(malformed_modules.module(malformed_modules.PARAMETER).SerializeToString())
  result = _rank("aot", tile_export, path, tmp_path / "best.json")
  assert (result.returncode, result.stdout) == (1, ""), result.stderr
  assert result.stderr == (f"rank: {path}: not an npz file (a zip archive of .npy arrays); an XLA module or "
                           f"tuning data (.pb) goes to --hlo={path}\n")


def test_a_model_without_its_compiled_library_is_refused_with_the_command_that_compiles_it(tmp_path):
  export_dir = untrained.export_untrained("tile:xla", tmp_path, units=8, layers=1)  # no native/
  result = _rank("aot", export_dir, _tile_file(tmp_path), tmp_path / "best.json")
  assert (result.returncode, result.stdout) == (1, ""), result.stderr
  assert result.stderr == (f"rank: {export_dir}/native/libtpu_graphs_model.so: not found; compile the model "
                           f"into it: python baselines/compile_native.py --model {export_dir} (after bazel build "
                           "//native:all)\n")


def test_flags_are_spelled_as_the_python_programs_and_mistakes_get_their_messages(tile_export, tmp_path):
  """--flag value as --flag=value, --help, --mode=aot by default; a run directory as --model and a
  folder as --input get baselines/rank.py's lines."""
  rank = str(bazel_outputs.built("native/tools/rank"))
  helped = subprocess.run([rank, "--help"], capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert (helped.returncode, helped.stderr) == (0, "") and helped.stdout.startswith("usage: rank [--mode=aot|capi] ")
  path = _tile_file(tmp_path)
  spaced = subprocess.run([rank, "--model", str(tile_export), "--input", str(path), "--top", str(TOP), "--json",
                           str(tmp_path / "spaced.json")], capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert spaced.returncode == 0, spaced.stderr
  assert _rank("aot", tile_export, path, tmp_path / "best.json").returncode == 0
  assert (tmp_path / "spaced.json").read_text() == (tmp_path / "best.json").read_text()
  shutil.copytree(tile_export, tmp_path / "run" / "export")
  with pytest.raises(errors.InputError) as not_an_export:
    ranker.check_export_dir(tmp_path / "run")
  with pytest.raises(errors.InputError) as not_a_file:
    npz.read_graph(tmp_path)
  for model, given, refused in [(tmp_path / "run", path, not_an_export), (tile_export, tmp_path, not_a_file)]:
    for mode in ("aot", "capi"):
      result = _rank(mode, model, given, tmp_path / "refused.json")
      assert (result.returncode, result.stderr) == (1, f"rank: {refused.value}\n")


def test_kernel_of_the_largest_bucket_is_scored_as_the_python_saved_model(tile_export, tmp_path):
  largest = tile_shapes.TILE_BUCKETS[-1]
  path = _tile_file(tmp_path, nodes=largest.nodes, config_feat=np.random.default_rng(0).integers(
      1, 64, [300, graphs.TILE_CONFIG_FEATURE_WIDTH]).astype(np.float32))
  result = _rank("aot", tile_export, path, tmp_path / "best.json")
  assert result.returncode == 0, result.stderr
  graph = npz.read_graph(path)
  _assert_same_ranking(tmp_path / "best.json", graph, _python_scores(tile_export, graph))


def test_damaged_file_is_refused_naming_it(tile_export, tmp_path):
  path = _tile_file(tmp_path)
  path.write_bytes(path.read_bytes()[:-200])
  result = _rank("aot", tile_export, path, tmp_path / "best.json")
  assert result.returncode == 1 and f"rank: {path}: " in result.stderr


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, xla_dumps.DumpedModule]:
  """XLA's own dumps (--xla_dump_hlo_as_proto) of a CNN and a transformer block."""
  return xla_dumps.dump_programs(["cnn", "transformer_block"], tmp_path_factory.mktemp("dumps"))


def _rank_module(mode: str, export_dir, path, json_path, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([str(bazel_outputs.built("native/tools/rank")), f"--mode={mode}", f"--model={export_dir}",
                         f"--hlo={path}", f"--top={TOP}", f"--json={json_path}", *flags], capture_output=True,
                        text=True, timeout=hang_guard.SECONDS, check=False)


def _rank_py(export_dir, path, json_path, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={export_dir}", f"--input={path}", f"--top={TOP}",
                         f"--json={json_path}", *flags],
                         capture_output=True, text=True, timeout=hang_guard.SECONDS, check=False)


def _assert_same_rankings(native: subprocess.CompletedProcess, python: subprocess.CompletedProcess,
                          native_json: pathlib.Path, python_json: pathlib.Path) -> list:
  """Both programs ranked the same graphs alike: the same best configs (but for ties within 1e-4),
  scores and predicted ratios to config 0 within 1e-4 relative, config 0's rank and what it is, the
  same description of what each sets, and the same console lines (each score shown to 4 digits,
  each ratio to 3). Returns the native JSON."""
  assert native.returncode == 0, native.stderr
  assert python.returncode == 0, python.stderr
  ours, theirs = json.loads(native_json.read_text()), json.loads(python_json.read_text())
  def graph_fields(g: dict) -> tuple:
    return (g["id"], g["collection"], g["num_configs"], g.get("layouts_meaning"), g["reference"],
            g.get("predicted_ratio_note"))
  assert [graph_fields(g) for g in ours] == [graph_fields(g) for g in theirs]
  for graph, expected in zip(ours, theirs):
    scores, expected_scores = (np.array([b["score"] for b in g["best"]]) for g in (graph, expected))
    tolerance = 1e-4 * max(np.abs(expected_scores).max(), 1e-30)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-4, atol=tolerance)
    for best, wanted in zip(graph["best"], expected["best"]):
      if best["config"] == wanted["config"]:
        ratios = ("predicted_ratio", "ratio_low", "ratio_high")
        np.testing.assert_allclose([best.get(k, np.nan) for k in ratios], [wanted.get(k, np.nan) for k in ratios],
                                   rtol=1e-4)
        assert {k: v for k, v in best.items() if k not in ratios} == {
            **{k: v for k, v in wanted.items() if k not in ratios}, "score": best["score"]}
      else:  # a tie within the tolerance may order two configs either way
        assert abs(best["score"] - wanted["score"]) <= tolerance
  if all(b["config"] == w["config"] for g, e in zip(ours, theirs) for b, w in zip(g["best"], e["best"])):
    assert [g["reference_rank"] for g in ours] == [g["reference_rank"] for g in theirs]
    # All but "wrote <json>"; the scores shown (4 digits) were compared above within 1e-4, and one
    # near a rounding boundary may print either way.
    def shown(completed: subprocess.CompletedProcess) -> list[str]:
      return [re.sub(r"\(-?[0-9.e+-]+\)", "(score)", re.sub(r"predicted [^x]*x config 0's runtime \([^)]*\)",
                                                              "predicted (ratio)", line))
              for line in completed.stdout.splitlines()[:-1]]
    assert shown(native) == shown(python)
  return ours


@pytest.mark.parametrize("mode", ["aot", "capi"])
def test_rank_hlo_ranks_the_kernels_of_a_module_dumped_by_xla_as_rank_py(tile_export, dumps, mode, tmp_path):
  optimized = dumps["cnn"].after_optimizations
  flags = ("--kernels", "--num_candidates=40", "--seed=4")
  ranked = _assert_same_rankings(_rank_module(mode, tile_export, optimized, tmp_path / "native.json", *flags),
                                 _rank_py(tile_export, optimized, tmp_path / "python.json", *flags),
                                 tmp_path / "native.json", tmp_path / "python.json")
  assert len(ranked) >= 2 and max(graph["num_configs"] for graph in ranked) == 40
  assert all(best["output_tile"] for graph in ranked for best in graph["best"])
  # XLA's CPU backend optimized it: both say the model was trained on TPU measurements, in one line.
  assert all(graph["backend_note"].startswith("note: this module was compiled for a backend other than TPU")
             for graph in ranked)


def test_rank_hlo_ranks_a_transformer_blocks_candidate_layouts_as_rank_py(layout_library, dumps, tmp_path):
  module = dumps["transformer_block"].before_optimizations
  flags = ("--num_candidates=64", "--seed=1")
  [ranked] = _assert_same_rankings(_rank_module("aot", layout_library, module, tmp_path / "native.json", *flags),
                                   _rank_py(layout_library, module, tmp_path / "python.json", *flags),
                                   tmp_path / "native.json", tmp_path / "python.json")
  assert ranked["num_configs"] == 64 and "minor-most" in ranked["layouts_meaning"] and "backend_note" not in ranked
  moved = [best["layouts"] for best in ranked["best"] if best["layouts"]]
  roles = {"result", "operand 0", "operand 1"}
  assert moved and all(re.fullmatch(r"(dot|reshape)\.\d+", name) and set(tensors) <= roles
                       for layouts in moved for name, tensors in layouts.items())


def test_a_module_ranked_on_its_own_config_alone_gets_the_hint_to_draw_candidates_as_from_rank_py(
    layout_library, dumps, tmp_path):
  module = dumps["transformer_block"].before_optimizations
  native = _rank_module("aot", layout_library, module, tmp_path / "native.json")
  [ranked] = _assert_same_rankings(native, _rank_py(layout_library, module, tmp_path / "python.json"),
                                   tmp_path / "native.json", tmp_path / "python.json")  # the hint line included
  assert ranked["num_configs"] == 1
  assert "; --num_candidates N ranks N candidate configs drawn as XLA's autotuners would try them\n" in native.stdout


@pytest.mark.parametrize("allowed", [False, True], ids=["entry_kept", "change_entry_layouts"])
def test_candidates_keep_the_entry_layouts_unless_allowed_and_mark_every_change_alike(layout_library, dumps, allowed,
                                                                                    tmp_path):
  """All 64 candidates of the transformer block listed: by default none moves a tensor of the entry
  computation's parameters or result (they are listed "kept" beside a moved one); allowed, some do,
  and say so (the C call's change field)."""
  module = dumps["transformer_block"].before_optimizations
  flags = ("--num_candidates=64", "--seed=2", "--top=64") + (("--change_entry_layouts",) if allowed else ())
  [ranked] = _assert_same_rankings(_rank_module("aot", layout_library, module, tmp_path / "native.json", *flags),
                                   _rank_py(layout_library, module, tmp_path / "python.json", *flags),
                                   tmp_path / "native.json", tmp_path / "python.json")
  changes = {tensor["change"] for best in ranked["best"] for tensors in best["layouts"].values()
             for tensor in tensors.values()}
  assert changes <= {"kept", "internal", "entry parameter", "entry result"} and {"kept", "internal"} <= changes
  assert bool(changes & {"entry parameter", "entry result"}) == allowed


def test_a_count_beyond_the_limit_is_refused_in_one_line_by_rank_rank_py_and_the_c_call(layout_library, dumps,
                                                                                    tmp_path):
  module = dumps["transformer_block"].before_optimizations
  refusal = ("100000000 candidates asked for, more than the limit of 100000 (max_candidates); ask for fewer or raise "
             "the limit")
  native = _rank_module("aot", layout_library, module, tmp_path / "native.json", "--num_candidates=100000000")
  python = _rank_py(layout_library, module, tmp_path / "python.json", "--num_candidates=100000000")
  assert (native.returncode, native.stdout, native.stderr) == (1, "", f"rank: {refusal}\n")
  assert (python.returncode, python.stdout, python.stderr) == (1, "", f"rank: {refusal}\n")
  called = subprocess.run([str(_call_program(layout_library, tmp_path)), str(module), "100000000", "0", "3", "1"],
                          capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert called.stdout == f"status 1: {refusal}\n"


def test_a_module_beyond_the_byte_limit_is_refused_by_rank_and_rank_py_alike(layout_library, dumps, tmp_path):
  module = dumps["transformer_block"].before_optimizations
  native = _rank_module("aot", layout_library, module, tmp_path / "native.json", "--max_module_bytes=1000")
  python = _rank_py(layout_library, module, tmp_path / "python.json", "--max_module_bytes=1000")
  refusal = f"{module}: holds more than 1000 bytes, the limit of a module (max_module_bytes)"
  assert (native.returncode, native.stderr, python.returncode, python.stderr) == (
      1, f"rank: {refusal}\n", 1, f"rank: {refusal}\n")


@pytest.fixture(scope="module")
def unmeasured_layout(tmp_path_factory) -> pathlib.Path:
  """The real unet_3d layout tuning data with its runs removed: the program before any run."""
  tuning = tuning_pb2.ModuleTuningData.FromString(sample_data.require_sample(LAYOUT_PB).read_bytes())
  del tuning.runs[:]
  path = tmp_path_factory.mktemp("unmeasured") / "unet_3d_unmeasured.pb"
  path.write_bytes(tuning.SerializeToString())
  return path


def test_rank_hlo_ranks_tuning_data_without_runs_through_candidates_as_rank_py(layout_library, unmeasured_layout,
                                                                              tmp_path):
  flags = ("--num_candidates=40", "--seed=9")
  [ranked] = _assert_same_rankings(
      _rank_module("aot", layout_library, unmeasured_layout, tmp_path / "native.json", *flags),
      _rank_py(layout_library, unmeasured_layout, tmp_path / "python.json", *flags),
      tmp_path / "native.json", tmp_path / "python.json")
  assert ranked["num_configs"] == 40 and all(re.fullmatch(r"(convolution|reshape)\.\d+", name)
                                             for best in ranked["best"] for name in best["layouts"])
  for program in (_rank_module("aot", layout_library, unmeasured_layout, tmp_path / "x.json"),
                  _rank_py(layout_library, unmeasured_layout, tmp_path / "y.json")):
    assert program.returncode == 1 and "has no configs to rank: nothing was measured yet" in program.stderr


def test_rank_says_as_rank_py_what_the_best_configs_of_npz_files_set(tile_export, layout_library, tmp_path):
  """An npz file names no instructions: layouts by node index, every node a config sets."""
  for export, relative in ((tile_export, REAL_TILE_FILES[1]), (layout_library, REAL_LAYOUT_FILES[0])):
    path = sample_data.require_sample(relative)
    native = _rank("aot", export, path, tmp_path / "native.json")
    python = subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={export}", f"--input={path}", f"--top={TOP}",
                             f"--json={tmp_path / 'python.json'}"],
                             capture_output=True, text=True, timeout=hang_guard.SECONDS)
    [ranked] = _assert_same_rankings(native, python, tmp_path / "native.json", tmp_path / "python.json")
    described = [best.get("layouts", best.get("output_tile")) for best in ranked["best"]]
    assert all(described)
    if "layouts" in ranked["best"][0]:
      assert all(name.startswith("node ") for layouts in described for name in layouts)


def test_rank_hlo_ranks_the_measured_configs_of_tuning_data_naming_the_instructions_they_move(layout_library, tmp_path):
  path = sample_data.require_sample(LAYOUT_PB)
  [ranked] = _assert_same_rankings(_rank_module("aot", layout_library, path, tmp_path / "native.json"),
                                   _rank_py(layout_library, path, tmp_path / "python.json"),
                                   tmp_path / "native.json", tmp_path / "python.json")
  assert ranked["num_configs"] == 112 and all(best["layouts"] for best in ranked["best"])



@pytest.mark.parametrize("mode", ["aot", "capi"])
def test_the_c_call_and_rank_give_rank_pys_predicted_ratios_to_config_0_within_1e_4(tile_export, mode, tmp_path):
  """The library's compiled-in calibration (the C call, --hlo in aot mode) and the export's
  calibration.json (an npz file; capi) predict what Ranker predicts, and config 0's rank."""
  assert (tile_export / "calibration.json").exists()
  kernels = sample_data.require_sample(TILE_PB)
  for native, python in (
      (_rank_module(mode, tile_export, kernels, tmp_path / "native.json", "--kernels"),
       _rank_py(tile_export, kernels, tmp_path / "python.json", "--kernels")),
      (_rank(mode, tile_export, sample_data.require_sample(REAL_TILE_FILES[1]), tmp_path / "native.json"),
       _rank_py(tile_export, sample_data.require_sample(REAL_TILE_FILES[1]), tmp_path / "python.json"))):
    ranked = _assert_same_rankings(native, python, tmp_path / "native.json", tmp_path / "python.json")
    assert all("predicted_ratio" in best and best["ratio_low"] <= best["predicted_ratio"] <= best["ratio_high"]
               for graph in ranked for best in graph["best"])
    assert all(1 <= graph["reference_rank"] <= graph["num_configs"] for graph in ranked)


def _repeated_config_lines(stdout: str) -> dict[str, list[str]]:
  """Per graph ("tile:xla:copy.25"), the console lines naming best configs listed more than once."""
  named, graph = {}, None
  for line in stdout.splitlines():
    if not line.startswith(" "):
      graph = line.split(": ")[0]
    elif line.startswith("  configs "):
      named.setdefault(graph, []).append(line)
  return named


def test_rank_hlo_names_the_configs_tuning_data_measured_more_than_once_as_rank_py(tile_export, tmp_path):
  """The real tile tuning data measured some configs more than once: three reshapes' one empty tile
  2 or 3 times, and config 0 of copy.25, fusion.245 and fusion.232 again as their 10, 22 and 51.
  With 61 listed (every config of every kernel but fusion.191's 579, none repeated), each kernel's
  repeats get one line naming them, and both programs print the same lines but for the scores."""
  path = sample_data.require_sample(TILE_PB)
  flags = ("--kernels", "--top=61")
  native = _rank_module("aot", tile_export, path, tmp_path / "native.json", *flags)
  python = _rank_py(tile_export, path, tmp_path / "python.json", *flags)
  ranked = _assert_same_rankings(native, python, tmp_path / "native.json", tmp_path / "python.json")
  # The same configs in the same order: _assert_same_rankings compared the console lines, scores masked.
  assert [[best["config"] for best in graph["best"]] for graph in ranked] == [
      [best["config"] for best in graph["best"]] for graph in json.loads((tmp_path / "python.json").read_text())]
  same = "set the same and score the same: one config, listed"
  expected = {"tile:xla:fusion.232": [f"  configs 0, 51 {same} 2 times"],
              "tile:xla:fusion.245": [f"  configs 0, 22 {same} 2 times"],
              "tile:xla:copy.25": [f"  configs 0, 10 {same} 2 times"],
              "tile:xla:reshape.37": [f"  configs 0, 1, 2 {same} 3 times"],
              "tile:xla:reshape.39": [f"  configs 0, 1 {same} 2 times"],
              "tile:xla:reshape.38": [f"  configs 0, 1 {same} 2 times"]}
  assert _repeated_config_lines(native.stdout) == _repeated_config_lines(python.stdout) == expected


def _call_program(export_dir, tmp_path) -> pathlib.Path:
  """tests/native/rank_module_call.c compiled and linked with the model library, as a compiler links it."""
  native = export_dir / "native"
  program = tmp_path / "rank_module_call"
  subprocess.run(["gcc", "-O1", str(pathlib.Path(__file__).with_name("rank_module_call.c")), f"-I{native}",
                  f"-L{native}", "-ltpu_graphs_model", f"-Wl,-rpath,{native}", "-lpthread", "-o", str(program)],
                 check=True, capture_output=True)
  return program


def test_the_c_call_ranks_from_many_threads_at_once_as_from_one(layout_library, unmeasured_layout, tmp_path):
  program = _call_program(layout_library, tmp_path)
  once, at_once = (subprocess.run([str(program), str(unmeasured_layout), "30", "5", "3", str(threads)],
                                  capture_output=True, text=True, timeout=hang_guard.SECONDS) for threads in (1, 6))
  assert (once.returncode, at_once.returncode) == (0, 0), once.stderr + at_once.stderr
  assert once.stdout == at_once.stdout and once.stdout.startswith("main__.10904 30\n")
  assert re.search(r"convolution\.\d+:-1:\d,\d,", once.stdout)  # a result layout, by instruction name


def test_rank_and_rank_py_write_the_same_module_back_with_the_best_candidate_applied(layout_library, dumps,
                                                                                    tmp_path):
  module = dumps["transformer_block"].before_optimizations
  flags = ("--num_candidates=64", "--seed=1")
  written = tmp_path / "written.pb"  # one path, so that both print the same lines
  native = _rank_module("aot", layout_library, module, tmp_path / "native.json", *flags, f"--write_module={written}")
  native_written = written.rename(tmp_path / "native.pb").read_bytes()
  python = _rank_py(layout_library, module, tmp_path / "python.json", *flags, f"--write_module={written}")
  [ranked] = _assert_same_rankings(native, python, tmp_path / "native.json", tmp_path / "python.json")
  best = ranked["best"][0]["config"]
  assert best == json.loads((tmp_path / "python.json").read_text())[0]["best"][0]["config"]
  expected, copies = module_writer.written_module(module.read_bytes(), str(module), 64, 1, best)
  assert native_written == written.read_bytes() == expected
  assert f"{module_writer.written_line(str(written), best, copies)}\n" in native.stdout


@pytest.mark.parametrize("flags, refusal", [
    (("--kernels", "--num_candidates=8"), f"--kernels with --write_module: {module_writer.TILE_SIZES_NOT_WRITTEN}"),
    ((), module_writer.NEEDS_CANDIDATES),
], ids=["tile_configs", "no_candidates"])
def test_rank_and_rank_py_refuse_alike_to_write_back_what_a_module_cannot_carry(layout_library, dumps, flags, refusal,
                                                                                tmp_path):
  module = dumps["transformer_block"].before_optimizations
  written = tmp_path / "written.pb"
  native = _rank_module("aot", layout_library, module, tmp_path / "n.json", *flags, f"--write_module={written}")
  python = _rank_py(layout_library, module, tmp_path / "p.json", *flags, f"--write_module={written}")
  assert (native.returncode, native.stdout, native.stderr) == (1, "", f"rank: {refusal}\n")
  assert (python.returncode, python.stdout, python.stderr) == (1, "", f"rank: {refusal}\n")
  assert not written.exists()


def test_rank_and_rank_py_refuse_to_write_an_npz_file_back_before_any_model_loads(tmp_path):
  """An npz file holds no module; both say so in one line before looking for the model (none here)."""
  path = sample_data.require_sample(REAL_LAYOUT_FILES[0])
  written, model = tmp_path / "written.pb", tmp_path / "no_model"
  native = subprocess.run([str(bazel_outputs.built("native/tools/rank")), f"--model={model}", f"--input={path}",
                           f"--write_module={written}"], capture_output=True, text=True, timeout=hang_guard.SECONDS)
  python = subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={model}", f"--input={path}",
                           f"--write_module={written}"], capture_output=True, text=True, timeout=hang_guard.SECONDS)
  for program in (native, python):
    assert (program.returncode, program.stdout, program.stderr) == (1, "", f"rank: {module_writer.NEEDS_A_MODULE}\n")
  assert not written.exists()


def test_the_c_call_writes_every_candidate_back_as_module_writer_py_and_refuses_one_not_drawn(layout_library, dumps,
                                                                                            tmp_path):
  """Each call made from four threads at once, which must give the same bytes (rank_module_call.c
  exits 3 otherwise)."""
  program = _call_program(layout_library, tmp_path)
  module = dumps["transformer_block"].before_optimizations
  for config in range(16):
    written = tmp_path / f"written_{config}.pb"
    called = subprocess.run([str(program), str(module), "16", "1", "--apply", str(config), str(written)],
                            capture_output=True, text=True, timeout=hang_guard.SECONDS)
    expected, copies = module_writer.written_module(module.read_bytes(), "", 16, 1, config)
    assert (called.returncode, called.stdout) == (0, f"copies {copies}\n"), called.stderr
    assert written.read_bytes() == expected, config
  refused = subprocess.run([str(program), str(module), "16", "1", "--apply", "16", str(tmp_path / "x.pb")],
                           capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert refused.stdout == "status 2: config 16 is not among the 16 candidates drawn (num_candidates 16, seed 1)\n"
  assert not (tmp_path / "x.pb").exists()


@pytest.fixture(scope="module")
def xla_parser(tmp_path_factory) -> pathlib.Path:
  """tests/native/xla_parse_module.cc compiled against the XLA inside the TensorFlow wheel (its headers,
  libtensorflow_cc.so.2): XLA's own HloModule::CreateFromProto and layout-sensitive HloVerifier."""
  wheel = pathlib.Path(tf.sysconfig.get_lib())
  program = tmp_path_factory.mktemp("xla") / "xla_parse_module"
  subprocess.run(["g++", "-O0", str(pathlib.Path(__file__).with_name("xla_parse_module.cc")),
                  *tf.sysconfig.get_compile_flags(), "-o", str(program), f"-L{wheel}", "-l:libtensorflow_cc.so.2",
                  "-l:libtensorflow_framework.so.2", f"-Wl,-rpath,{wheel}"], check=True, capture_output=True,
                 timeout=hang_guard.SECONDS)
  return program


def test_xla_reads_and_verifies_every_module_written_back_and_refuses_a_copy_of_the_wrong_shape(xla_parser, dumps,
                                                                                              tmp_path):
  """Every candidate of XLA's dumps of a CNN and a transformer block, written back (the bytes the
  C call and //native:rank write, above), is a module XLA reads and its layout-sensitive verifier
  passes; the same module with one inserted copy's shape broken is refused, so the check can fail."""
  paths, broken = [], None
  for name in ("cnn", "transformer_block"):
    data = dumps[name].before_optimizations.read_bytes()
    for config in range(16):
      written, copies = module_writer.written_module(data, "", 16, 1, config)
      paths.append(tmp_path / f"{name}_{config}.pb")
      paths[-1].write_bytes(written)
      if copies and broken is None:
        dump = hlo_pb2.HloProto.FromString(written)
        original = {i.id for c in hlo_pb2.HloProto.FromString(data).hlo_module.computations for i in c.instructions}
        copy = next(i for c in dump.hlo_module.computations for i in c.instructions if i.id not in original)
        copy.shape.dimensions[0] += 1
        broken = tmp_path / "broken.pb"
        broken.write_bytes(dump.SerializeToString())
  assert broken is not None
  read = subprocess.run([str(xla_parser), *map(str, paths), str(broken)], capture_output=True, text=True,
                        timeout=hang_guard.SECONDS, check=True)
  lines = read.stdout.splitlines()
  assert len(lines) == len(paths) + 1
  assert all(re.fullmatch(rf"{re.escape(str(path))}: ok \d+ instructions", line) for path, line in zip(paths, lines))
  assert lines[-1].startswith(f"{broken}: ") and " ok " not in lines[-1]


@pytest.mark.parametrize("data, message", [
    (b"\x0a\xff\xff\xff\xff\x0f garbage", "not a serialized ModuleTuningData, TuningData, HloModuleProto or HloProto"),
    (malformed_modules.MODULES["dangling_operand"].SerializeToString(),
     "instruction 'neg' has operand id 99, which no instruction"),
    (malformed_modules.MODULES["two_instruction_cycle"].SerializeToString(), "depends on itself through its operands"),
    (malformed_modules.MODULES["negative_dimension"].SerializeToString(),
     "has a negative dimension in its shape [4, -1]"),
    (malformed_modules.MODULES["no_entry_computation"].SerializeToString(), "module 'm': has no entry computation"),
], ids=["garbage", "missing_operand", "cycle", "negative_dimension", "no_entry_computation"])
def test_the_c_call_refuses_malformed_modules_with_a_status_and_a_message(tile_export, tmp_path, data, message):
  program = _call_program(tile_export, tmp_path)
  path = tmp_path / "module.pb"
  path.write_bytes(data)
  for candidates in ("0", "10"):
    called = subprocess.run([str(program), str(path), candidates, "0", "3", "2"], capture_output=True, text=True,
                            timeout=hang_guard.SECONDS)
    assert called.returncode == 0 and called.stdout.startswith(f"status {2}: ") and message in called.stdout, called


def test_the_c_call_refuses_a_truncated_module(tile_export, dumps, tmp_path):
  program = _call_program(tile_export, tmp_path)
  path = tmp_path / "truncated.pb"
  data = dumps["cnn"].after_optimizations.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  called = subprocess.run([str(program), str(path), "10", "0", "3", "1"],
                          capture_output=True, text=True, timeout=hang_guard.SECONDS)
  assert called.stdout.startswith("status 2: not a serialized"), called


def _sanitized_library(export_dir, tmp_path, sanitizer: list[str], featurizer_archive=None) -> pathlib.Path:
  """The model compiled in export_dir/native linked again by g++ with `sanitizer`'s flags."""
  return native_library.relink(export_dir / "native", bazel_outputs.built("native/libxla_aot_runtime.a").parent,
                               tmp_path / export_dir.name / native_library.LIBRARY_NAME, ["g++", "-O1", *sanitizer],
                               featurizer_archive)


def test_the_model_libraries_replay_what_their_fuzz_targets_found_without_a_finding(tile_export, layout_library,
                                                                                    tmp_path):
  replayed = 0
  for target, export_dir in (("tile_library", tile_export), ("layout_library", layout_library)):
    regressions = FUZZ_DIR / "regressions" / target
    inputs = sorted(regressions.glob("*"))
    if not inputs:
      continue
    library = _sanitized_library(export_dir, tmp_path, ADDRESS_SANITIZER)
    program = tmp_path / f"{target}_replay"
    subprocess.run(["g++", "-std=c++17", "-O1", *ADDRESS_SANITIZER, f"-I{native_library.NATIVE_SOURCES.parent}",
                    str(FUZZ_DIR / f"{target}_fuzzer.cc"), str(FUZZ_DIR / "replay_main.cc"), f"-L{library.parent}",
                    "-ltpu_graphs_model", f"-Wl,-rpath,{library.parent}", "-o", str(program)],
                   check=True, capture_output=True)
    replay = subprocess.run([str(program), str(regressions)], capture_output=True, text=True, timeout=600)
    assert replay.returncode == 0 and f"replayed {len(inputs)} inputs without a finding" in replay.stdout, \
        replay.stderr[-4000:]
    replayed += len(inputs)
  if not replayed:
    pytest.skip("no fuzz finding of a model library is kept in native/fuzz/regressions/")


def test_the_libraries_answer_threads_at_once_as_one_thread_under_thread_sanitizer(tile_export, layout_library, dumps,
                                                                                  tmp_path):
  program = tmp_path / "library_threads"
  subprocess.run(["g++", "-std=c++17", "-O1", *THREAD_SANITIZER, f"-I{native_library.NATIVE_SOURCES.parent}",
                  str(pathlib.Path(__file__).with_name("library_threads.cc")),
                  str(native_library.NATIVE_SOURCES / "npz" / "npz.cc"), "-ldl", "-lz", "-pthread", "-o", str(program)],
                 check=True, capture_output=True)
  featurizer = bazel_outputs.built("native/libtpu_graphs_featurizer_tsan.a")
  generated = locations.EMBEDDED_NPZ
  tile_graphs = sorted((generated / "tile/xla/test").glob("*.npz"))[:6]  # 6 to 26 ops: buckets of 16 and 32
  layout_graphs = sorted((generated / "layout/xla/default/test").glob("*.npz"))  # 350 to 3,047 ops
  for export_dir, module, npz_files in ((tile_export, dumps["cnn"].after_optimizations, tile_graphs),
                                      (layout_library, dumps["transformer_block"].before_optimizations,
                                       layout_graphs)):
    library = _sanitized_library(export_dir, tmp_path, THREAD_SANITIZER, featurizer)
    called = subprocess.run([str(program), str(library), "4", "3", str(module), "20", *map(str, npz_files)],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "TSAN_OPTIONS": "halt_on_error=1"})
    assert called.returncode == 0 and "ThreadSanitizer" not in called.stderr, called.stderr[-6000:]
    assert called.stdout.startswith(f"{4 * 3 * (len(npz_files) + 1)} calls from 4 threads agreed"), called.stdout


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
