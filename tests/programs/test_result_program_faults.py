"""The fault matrix (tests/fault_matrix.py) of the programs that rank and submit: rank.py,
evaluate.py and combine_csvs.py."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import sys
from typing import Callable

import numpy as np
import pytest

import fault_matrix
import tile_test_data

from tpu_graphs.data import npz

Call, Case, Workspace = fault_matrix.Call, fault_matrix.Case, fault_matrix.Workspace


def _predictions(workspace: Workspace, folder: pathlib.Path) -> pathlib.Path:
  """A valid predictions CSV for the workspace's test graphs."""
  path = folder / "predictions.csv"
  rows = [f"tile:xla:{p.stem},0;1;2;3;4" for p in sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))]
  path.write_text("ID,TopConfigs\n" + "\n".join(rows) + "\n")
  return path


def _old_submission(folder: pathlib.Path) -> pathlib.Path:
  path = folder / "submission.csv"
  path.write_text("ID,TopConfigs\nan earlier submission\n")
  return path


def _rank_of(kind):
  def make(workspace, folder):
    kind(folder / "bad.npz")
    return [f"--model={workspace.run / 'export'}", f"--input={folder / 'bad.npz'}"]
  return fault_matrix.with_flags(make)


def _combine(data_root: Callable[[Workspace, pathlib.Path], pathlib.Path],
             output: Callable[[pathlib.Path], pathlib.Path] = lambda folder: folder / "submission.csv",
             predictions: Callable[[Workspace, pathlib.Path], pathlib.Path] = _predictions, **call):
  def prepare(workspace: Workspace, folder: pathlib.Path) -> Call:
    old = _old_submission(folder)
    flags = [f"--predictions={predictions(workspace, folder)}", f"--data_root={data_root(workspace, folder)}",
             f"--output={output(folder)}"]
    return Call(flags, kept=[old], **call)
  return prepare


def _non_utf8_predictions(workspace, folder):
  path = folder / "latin1.csv"
  path.write_bytes("ID,TopConfigs\ntile:xla:caf\xe9,0;1;2;3;4\n".encode("latin-1"))
  return path


def _empty_root(workspace, folder):
  (folder / "empty").mkdir()
  return folder / "empty"


def prepare_rank_json_naming_its_input(workspace: Workspace, folder: pathlib.Path) -> Call:
  graph = folder / "graph.npz"
  shutil.copy(sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0], graph)
  return Call([f"--model={workspace.run / 'export'}", f"--input={graph}", f"--json={graph}"], kept=[graph])


def prepare_rank_unusual_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  graph = folder / f"{fault_matrix.UNUSUAL_NAME}.npz"
  shutil.copy(sorted((workspace.npz_root / "tile/xla/test").glob("*.npz"))[0], graph)

  def check(completed):
    [ranked] = json.loads((folder / "best.json").read_text())
    assert ranked["id"] == fault_matrix.UNUSUAL_NAME

  return Call([f"--model={workspace.run / 'export'}", f"--input={graph}", f"--json={folder / 'best.json'}"],
              check=check)


def prepare_combine_unusual_test_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  """A data root whose test graph's file name Kaggle has no ID for; predictions that rank it."""
  split_dir = fault_matrix.tile_dir(folder, "test")
  (split_dir / "good.npz").rename(split_dir / f"{fault_matrix.UNUSUAL_NAME}.npz")
  predictions = folder / "predictions.csv"
  predictions.write_text(f'ID,TopConfigs\n"tile:xla:{fault_matrix.UNUSUAL_NAME}",0;1;2;3;4\n')
  old = _old_submission(folder)
  return Call([f"--predictions={predictions}", f"--data_root={folder / 'npz'}", f"--output={old}"], kept=[old])


def prepare_combine_runs_of_other_data(workspace: Workspace, folder: pathlib.Path) -> Call:
  """Runs whose predictions combine_csvs.py passes over: one of another data root, one without config.json."""
  for name, config in (("elsewhere", {"experiment": {"data_root": "/data/another/npz"}}), ("bare", None)):
    run = folder / "runs" / name
    run.mkdir(parents=True)
    shutil.copy(_predictions(workspace, folder), run / "predictions.csv")
    if config is not None:
      (run / "config.json").write_text(json.dumps(config))

  def check(completed):
    assert not (folder / "submission.csv").exists()

  return Call([f"--runs_dir={folder / 'runs'}", f"--data_root={workspace.npz_root}",
               f"--output={folder / 'submission.csv'}"], check=check)


def prepare_evaluate_split_nothing_measured(workspace: Workspace, folder: pathlib.Path) -> Call:
  """A valid split whose graphs all have runtimes 0: labelled, yet nothing to compute metrics on."""
  split_dir = folder / "npz" / "tile" / "xla" / "valid"
  for index in range(2):
    graph = tile_test_data.tile_graph(np.random.default_rng(index), f"unmeasured_{index}", "valid", 24)
    npz.write_graph(split_dir / f"{graph.graph_id}.npz",
                    dataclasses.replace(graph, config_runtime=np.zeros_like(graph.config_runtime)))

  def check(completed):  # refused before converting or writing anything
    assert not (folder / "eval").exists()

  return Call([f"--run_dir={workspace.run}", f"--data_root={folder / 'npz'}", "--split=valid",
               f"--out_dir={folder / 'eval'}"], check=check)


CASES = [
    Case("rank_fifo_named_npz", "rank", _rank_of(fault_matrix.special_file("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("rank_top_negative", "rank", fault_matrix.flags_only("--model={export}", "--input={test_graph}", "--top=-1"),
         r"--top must be at least 1"),
    Case("rank_num_candidates_of_an_npz", "rank", fault_matrix.flags_only("--model={export}", "--input={test_graph}",
                                                         "--num_candidates=5"),
         r"\.npz: an npz file carries its graph and configs; --kernels and --num_candidates are for an HLO module "
         r"\(\.pb\)"),
    Case("rank_file_name_with_spaces_and_non_ascii", "rank", prepare_rank_unusual_file_name,
         rf":{fault_matrix.UNUSUAL_NAME}: \d+ configs, best first", status=0),
    Case("rank_json_naming_its_input", "rank", prepare_rank_json_naming_its_input,
         r"graph\.npz: --json would overwrite the input .*graph\.npz"),
    Case("rank_json_to_dev_full", "rank", fault_matrix.flags_only("--model={export}", "--input={test_graph}", "--json=/dev/full"),
         r"/dev/full: a device or socket, not a regular file; refusing to replace it"),
    Case("evaluate_tile_run_as_layout", "evaluate",
         fault_matrix.flags_only("--collection=layout:xla:default", "--run_dir={run}", "--data_root={embedded}", "--out_dir={case}/eval"),
         r"trained a TileTask, which cannot score layout:xla:default graphs"),
    Case("evaluate_labelled_split_with_nothing_measured", "evaluate", prepare_evaluate_split_nothing_measured,
         r"valid: no graph of the valid split has a measured runtime \(every config_runtime is 0\), so there is "
         r"nothing to evaluate against; for predictions only, put the files in a test/ folder and pass --split test"),
    Case("combine_non_utf8_csv", "combine_csvs", _combine(lambda workspace, folder: workspace.npz_root,
                                                          predictions=_non_utf8_predictions),
         r"latin1\.csv: not UTF-8 text"),
    Case("combine_data_root_without_test_files", "combine_csvs", _combine(_empty_root),
         r"empty: no test-split \.npz files"),
    Case("combine_test_file_name_kaggle_has_no_id_for", "combine_csvs", prepare_combine_unusual_test_file_name,
         rf"{fault_matrix.UNUSUAL_NAME}\.npz: graph id '{fault_matrix.UNUSUAL_NAME}' \(the file name\) cannot be in a Kaggle submission, whose "
         r"IDs are the release's file names \(printable ASCII, no spaces\); rename the file"),
    Case("combine_runs_trained_on_other_data", "combine_csvs", prepare_combine_runs_of_other_data,
         r"runs: 2 predictions\.csv found, none of a run trained on .*: .*bare/predictions\.csv: no config\.json "
         r"beside it records its data root; .*elsewhere/predictions\.csv: trained on .*another.*, not "),
    Case("combine_output_under_a_file", "combine_csvs",
         _combine(lambda workspace, folder: workspace.npz_root, output=lambda folder: fault_matrix.a_file(folder) / "submission.csv"),
         r"a_file: File exists|a_file.*: Not a directory"),
    Case("combine_disk_full", "combine_csvs",
         _combine(lambda workspace, folder: workspace.npz_root, file_size_limit=16), r"submission\.csv: File too large"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
  """{case name: Outcome} of every case, run CONCURRENT_CASES at a time."""
  with fault_matrix.workspace(tmp_path_factory.mktemp("faults")) as workspace:
    return fault_matrix.run_cases(workspace, CASES)[0]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_fault_ends_in_one_clean_line_or_the_correct_result_and_loses_nothing(case, outcomes):
  fault_matrix.check_outcome(case, outcomes[case.name])


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
