"""The Beam conversion: the same bytes as the single-process converter, raw protos in, errors named."""

import pathlib
import shutil
import sys

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

import memory_file_system
import sample_data
from tpu_graphs.data import beam_pipeline, convert, npz
from tpu_graphs.hlo import featurize


def two_worker_processes():
  return PipelineOptions(["--runner=DirectRunner", "--direct_num_workers=2",
                          "--direct_running_mode=multi_processing"])


def in_process():
  return PipelineOptions(["--runner=DirectRunner"])


def tree_bytes(root):
  return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_worker_direct_runner_writes_the_single_process_bytes(tmp_path):
  source = sample_data.require_sample("npz")
  convert.convert_directory(source, tmp_path / "single", configs_per_chunk=300, shard_bytes=4000, progress=False)
  summary = beam_pipeline.run_conversion(source, tmp_path / "beam", two_worker_processes(),
                                         configs_per_chunk=300, shard_bytes=4000)
  single, beam = tree_bytes(tmp_path / "single"), tree_bytes(tmp_path / "beam")
  assert beam == single
  assert "tile/xla/test/structure-00003-of-00004.tfrecord.gz" in beam  # several shards per group
  assert summary.graphs_written == len(list(source.rglob("*.npz"))) and summary.graphs_skipped == 0


def test_rerun_skips_finished_shards_and_keeps_the_bytes(tmp_path):
  source = sample_data.require_sample("npz/tile/xla")
  tree = tmp_path / "npz/tile/xla"
  shutil.copytree(source, tree)
  first = beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(), shard_bytes=4000)
  before = tree_bytes(tmp_path / "out")
  again = beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(), shard_bytes=4000)
  assert (first.graphs_written, again.graphs_written, again.graphs_skipped) == (8, 0, 8)
  assert tree_bytes(tmp_path / "out") == before


def test_output_on_an_in_memory_file_system_gets_the_single_process_bytes(tmp_path):
  source = sample_data.require_sample("npz/tile/xla")
  shutil.copytree(source, tmp_path / "npz/tile/xla")
  convert.convert_directory(tmp_path / "npz", tmp_path / "single", shard_bytes=4000, progress=False)
  url = memory_file_system.fresh_directory("beam")
  summary = beam_pipeline.run_conversion(tmp_path / "npz", url, in_process(), shard_bytes=4000)
  assert memory_file_system.tree_bytes(url) == memory_file_system.tree_bytes(tmp_path / "single")
  assert summary.graphs_written == 8 and summary.groups[0]["directory"].startswith(url + "/")


def test_input_on_an_in_memory_file_system_gets_the_single_process_bytes(tmp_path):
  source = sample_data.require_sample("npz/tile/xla")
  shutil.copytree(source, tmp_path / "npz/tile/xla")
  convert.convert_directory(tmp_path / "npz", tmp_path / "single", shard_bytes=4000, progress=False)
  url = memory_file_system.copy_tree(tmp_path / "npz", "npz")
  summary = beam_pipeline.run_conversion(url, tmp_path / "beam", in_process(), shard_bytes=4000)
  assert memory_file_system.tree_bytes(tmp_path / "beam") == memory_file_system.tree_bytes(tmp_path / "single")
  assert summary.graphs_written == 8


def test_protos_on_an_in_memory_file_system_are_featurized_into_it(tmp_path):
  pb_dir = sample_data.require_sample("pb/official_testdata")
  shutil.copy(pb_dir / "module_tuning_data_layout.pb", tmp_path)
  protos, npz_url = memory_file_system.copy_tree(tmp_path, "pb"), memory_file_system.fresh_directory("npz")
  beam_pipeline.run_conversion(npz_url, tmp_path / "beam", in_process(), input_pb_glob=protos + "/*.pb",
                               featurize_file=featurize.graphs_from_file)
  assert list(memory_file_system.tree_bytes(npz_url)) == ["layout/xla/default/train/main__.10904.npz"]
  npz.write_graph(tmp_path / "npz/layout/xla/default/train/main__.10904.npz",
                  featurize.graphs_from_file(pb_dir / "module_tuning_data_layout.pb")[0])
  assert memory_file_system.tree_bytes(npz_url) == memory_file_system.tree_bytes(tmp_path / "npz")
  convert.convert_directory(tmp_path / "npz", tmp_path / "single", progress=False)
  assert memory_file_system.tree_bytes(tmp_path / "beam") == memory_file_system.tree_bytes(tmp_path / "single")


def test_raw_protos_are_featurized_then_converted_like_their_npz_files(tmp_path):
  pb_dir = sample_data.require_sample("pb/official_testdata")
  summary = beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "beam", two_worker_processes(),
                                         input_pb_glob=str(pb_dir / "*.pb"),
                                         featurize_file=featurize.graphs_from_file, labelled_split="valid")
  expected = [g for path in sorted(pb_dir.glob("*.pb")) for g in featurize.graphs_from_file(path)]
  featurized = sorted(p.relative_to(tmp_path / "npz") for p in (tmp_path / "npz").rglob("*.npz"))
  assert featurized == sorted(pathlib.Path(*g.collection.split(":"), "valid", g.graph_id + ".npz") for g in expected)
  assert len(featurized) == 16  # 1 layout graph (unet_3d.4x4.bf16, module main__.10904) + 15 kernels
  layout = npz.read_graph(tmp_path / "npz/layout/xla/default/valid/main__.10904.npz")
  assert (layout.node_feat.shape[0], layout.num_configs) == (3163, 112)
  convert.convert_directory(tmp_path / "npz", tmp_path / "single", progress=False)
  assert tree_bytes(tmp_path / "beam") == tree_bytes(tmp_path / "single")
  assert {(g["collection"], g["split"], g["graphs"]) for g in summary.groups} == {
      ("layout:xla:default", "valid", 1), ("tile:xla", "valid", 15)}


def test_bad_input_file_fails_the_run_naming_it(tmp_path):
  shutil.copytree(sample_data.require_sample("npz/tile/xla/train"), tmp_path / "npz/tile/xla/train")
  (tmp_path / "npz/tile/xla/train/broken.npz").write_bytes(b"not a zip")
  with pytest.raises(Exception, match="broken.npz: not a readable npz archive"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process())


def test_two_protos_with_the_same_graph_are_refused(tmp_path):
  layout_pb = sample_data.require_sample("pb/official_testdata/module_tuning_data_layout.pb")
  (tmp_path / "pb").mkdir()
  for name in ("a.pb", "b.pb"):
    shutil.copy(layout_pb, tmp_path / "pb" / name)
  with pytest.raises(Exception, match=r"main__\.10904\.npz was also featurized from .*a\.pb"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(),
                                 input_pb_glob=str(tmp_path / "pb/*.pb"), featurize_file=featurize.graphs_from_file)


def test_missing_inputs_and_unknown_split_fail_before_running(tmp_path):
  with pytest.raises(FileNotFoundError, match="no file matches"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(),
                                 input_pb_glob=str(tmp_path / "*.pb"), featurize_file=featurize.graphs_from_file)
  with pytest.raises(FileNotFoundError, match="input directory not found"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process())
  with pytest.raises(ValueError, match="labelled_split 'dev'"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(),
                                 input_pb_glob=str(tmp_path / "*.pb"),
                                 featurize_file=featurize.graphs_from_file, labelled_split="dev")
  with pytest.raises(ValueError, match="no featurize_file"):
    beam_pipeline.run_conversion(tmp_path / "npz", tmp_path / "out", in_process(), input_pb_glob=str(tmp_path / "*.pb"))


@pytest.mark.parametrize("options, message", [(["--runner=NoSuchRunner"], "--runner: Unexpected pipeline runner"),
                                              (["--direct_num_workers=many"], "invalid int value: 'many'")])
def test_bad_beam_pipeline_options_are_refused_in_one_line(options, message):
  with pytest.raises(beam_pipeline.PipelineOptionError, match=message):
    beam_pipeline.checked_options(options)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
