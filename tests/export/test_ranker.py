"""The Ranker and baselines/rank.py: scores from the exported model, ranked; npz and HLO inputs."""

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import sample_data
import tile_test_data
from tpu_graphs.data import errors, npz
from tpu_graphs.export import ranker, saved_model
from tpu_graphs.models import tile_model
from tpu_graphs.train import calibration

REAL_TILE_FILE = "npz/tile/xla/test/0ac539372cc77cc6791794b369b984e1.npz"  # 65 ops, 2,951 configs
REAL_TILE_PROTO = "pb/official_testdata/op_tuning_data.pb"  # TuningData of 15 kernels
REAL_LAYOUT_FILE = "npz/layout/xla/default/test/cd708819d3f5103afd6460b15e74eaf3.npz"
RANK_PROGRAM = pathlib.Path(__file__).resolve().parents[2] / "baselines" / "rank.py"


@pytest.fixture(scope="module")
def tile_export(tmp_path_factory):
  """A small (untrained) tile model exported for serving: ranking needs scores, not good ones."""
  root = tmp_path_factory.mktemp("tile")
  batch = tile_test_data.merged_batch(tile_test_data.tile_graph_tensors(root, 2)).with_indices_dtype(tf.int32)
  scorer = tile_model.build_tile_model(batch.spec.relax(num_components=True, num_nodes=True, num_edges=True),
                                       "late", "sage", units=16, num_layers=2)
  saved_model.export(scorer, "tile", root / "export")
  return root / "export"


# A different number of configs per call changes how the kernels block their sums, so scores of the
# same config may differ in the last bits (one in 2,951 did by 6e-7 on CI).
SAME_SCORE = dict(rtol=1e-5, atol=1e-5)


def _plain_scores(export_dir, graph) -> np.ndarray:
  serve = tf.saved_model.load(str(export_dir)).signatures[saved_model.PLAIN_SIGNATURE]
  return serve(node_feat=graph.node_feat, node_opcode=graph.node_opcode, edge_index=graph.edge_index,
               config_feat=graph.config_feat)["scores"].numpy()


def test_ranking_orders_configs_by_the_saved_model_scores(tile_export):
  graph = npz.read_graph(sample_data.require_sample(REAL_TILE_FILE))
  ranking = ranker.Ranker(tile_export).rank(graph)
  np.testing.assert_allclose(ranking.scores, _plain_scores(tile_export, graph), **SAME_SCORE)
  assert sorted(ranking.order.tolist()) == list(range(graph.num_configs))
  assert np.all(np.diff(ranking.scores[ranking.order]) >= 0)
  best = ranking.best(3)
  assert [index for index, _ in best] == ranking.order[:3].tolist()
  assert best[0][1] == ranking.scores.min()


def test_chunked_calls_give_the_scores_of_one_call(tile_export):
  graph = npz.read_graph(sample_data.require_sample(REAL_TILE_FILE))
  whole = ranker.Ranker(tile_export, configs_per_call=10_000).score(graph)
  chunked = ranker.Ranker(tile_export, configs_per_call=97).score(graph)
  np.testing.assert_allclose(chunked, whole, **SAME_SCORE)


def test_npz_file_configs_are_streamed_in_chunks(tile_export):
  path = sample_data.require_sample(REAL_TILE_FILE)
  [ranking] = ranker.Ranker(tile_export, configs_per_call=500).rank_file(path)
  assert (ranking.collection, ranking.graph_id) == ("tile:xla", path.stem)
  np.testing.assert_allclose(ranking.scores, _plain_scores(tile_export, npz.read_graph(path)),
                             **SAME_SCORE)


def test_hlo_proto_is_featurized_into_one_ranking_per_kernel(tile_export):
  rankings = ranker.Ranker(tile_export).rank_file(sample_data.require_sample(REAL_TILE_PROTO))
  assert len(rankings) == 15
  assert len({r.graph_id for r in rankings}) == 15
  assert all(2 <= r.scores.size <= 581 and np.isfinite(r.scores).all() for r in rankings)


def test_graph_of_the_other_collection_kind_is_rejected(tile_export):
  layout = npz.read_graph(sample_data.require_sample(REAL_LAYOUT_FILE))
  with pytest.raises(ValueError, match="layout:xla:default graph; .* scores tile graphs"):
    ranker.Ranker(tile_export).rank(layout)


@pytest.mark.parametrize("model, message", [
    ("run", "{run}: a training run's folder; its serving model is {run}/export"),
    ("run/missing", "{run}/missing: no such folder; a serving model is the export/ folder of a run of "
                    "baselines/tiles_train.py, layout_train.py or quickstart.py (<run>/export)"),
    ("run/logs", "{run}/logs: no saved_model.pb, so no serving model; a serving model is the export/ folder of a run "
                 "of baselines/tiles_train.py, layout_train.py or quickstart.py (<run>/export)"),
], ids=["run_directory", "missing_folder", "folder_without_a_saved_model"])
def test_a_folder_that_is_no_serving_model_is_refused_saying_where_one_is(tile_export, tmp_path, model, message):
  run = tmp_path / "run"
  shutil.copytree(tile_export, run / "export")
  (run / "logs").mkdir()
  with pytest.raises(errors.InputError) as refused:
    ranker.Ranker(tmp_path / model)
  assert str(refused.value) == message.format(run=run)
  completed = subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={tmp_path / model}", "--input=x.npz"],
                             capture_output=True, text=True)
  assert completed.returncode == 1 and completed.stderr == f"rank: {refused.value}\n"


@pytest.mark.parametrize("count", [0, -1, 2.5, True])
def test_best_of_a_count_below_one_or_not_a_count_is_refused(tile_export, count):
  ranking = ranker.Ranker(tile_export).rank(tile_test_data.tile_graph(np.random.default_rng(0), "k", "test", 10))
  with pytest.raises(ValueError, match=rf"Ranking.best\({count!r}\): the count of best configs must be an integer "
                     "of at least 1"):
    ranking.best(count)


def test_rank_program_prints_the_best_configs_and_writes_json(tile_export, tmp_path):
  path = sample_data.require_sample(REAL_TILE_FILE)
  completed = subprocess.run(
      [sys.executable, str(RANK_PROGRAM), f"--model={tile_export}", f"--input={path}", "--top=4",
       f"--json={tmp_path / 'best.json'}"], check=True, capture_output=True, text=True)
  expected = ranker.Ranker(tile_export).rank(npz.read_graph(path))
  [written] = json.loads((tmp_path / "best.json").read_text())
  assert written["id"] == path.stem and written["collection"] == "tile:xla" and written["num_configs"] == 2951
  assert [entry["config"] for entry in written["best"]] == expected.order[:4].tolist()
  assert f"tile:xla:{path.stem}: 2951 configs, best first: {expected.order[0]} (" in completed.stdout


def _calibrated_copy(tile_export, into: pathlib.Path) -> pathlib.Path:
  """The export with a calibration beside it, as a trained run's export holds one."""
  shutil.copytree(tile_export, into)
  fitted = calibration.Calibration(knots=(0.01, 0.05, 0.2), knot_values=(0.02, 0.1, 0.3),
                                   bin_edges=(0.01, 0.05, 0.2), half_widths=(0.01, 0.03, 0.1, 0.3),
                                   coverage=calibration.COVERAGE, pairs=100, graphs=4)
  (into / calibration.FILE_NAME).write_text(json.dumps(calibration.as_json(fitted)))
  return into


def test_rank_program_gives_each_best_config_its_predicted_ratio_to_config_0_and_config_0s_rank(tile_export,
                                                                                               tmp_path):
  export = _calibrated_copy(tile_export, tmp_path / "export")
  path = sample_data.require_sample(REAL_TILE_FILE)
  completed = subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={export}", f"--input={path}", "--top=3",
                              f"--json={tmp_path / 'best.json'}"], check=True, capture_output=True, text=True)
  expected = ranker.Ranker(export).rank(npz.read_graph(path))
  ratios = expected.predicted_ratios(expected.order[:3])
  [written] = json.loads((tmp_path / "best.json").read_text())
  assert written["reference_rank"] == expected.reference_rank() == int(np.flatnonzero(expected.order == 0)[0]) + 1
  assert written["reference"].startswith("config 0 of the file")
  np.testing.assert_allclose([[entry["predicted_ratio"], entry["ratio_low"], entry["ratio_high"]]
                              for entry in written["best"]], ratios, rtol=1e-6)
  assert all(low < ratio < high for ratio, low, high in ratios)
  assert f"config 0, config 0 of the file" in completed.stdout
  assert f"ranks {expected.reference_rank()} of 2951" in completed.stdout
  assert f"predicted {ratios[0][0]:.3g}x config 0's runtime (80% interval {ratios[0][1]:.3g}-{ratios[0][2]:.3g})" in (
      completed.stdout)


def test_an_export_without_a_calibration_gives_no_ratio_and_says_why(tile_export, tmp_path):
  path = sample_data.require_sample(REAL_TILE_FILE)
  completed = subprocess.run([sys.executable, str(RANK_PROGRAM), f"--model={tile_export}", f"--input={path}",
                              "--top=2", f"--json={tmp_path / 'best.json'}"], check=True, capture_output=True,
                             text=True)
  [written] = json.loads((tmp_path / "best.json").read_text())
  assert written["predicted_ratio_note"] == calibration.NO_CALIBRATION and "reference_rank" in written
  assert not any("predicted_ratio" in entry for entry in written["best"])
  assert calibration.NO_CALIBRATION in completed.stdout and "x config 0's runtime" not in completed.stdout
  assert ranker.Ranker(tile_export).rank(npz.read_graph(path)).predicted_ratios([0, 1]) is None


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
