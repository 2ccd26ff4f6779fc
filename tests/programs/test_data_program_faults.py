"""The fault matrix (tests/fault_matrix.py) of the programs that fetch, make and convert data:
download.py, generate.py, featurize.py, stats.py, convert.py and convert_beam.py."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tarfile
import zipfile
from typing import Callable

import numpy as np
import pytest

import fault_matrix
import tile_test_data

from tpu_graphs.data import convert, download, graphs, npz

Call, Case, Workspace = fault_matrix.Call, fault_matrix.Case, fault_matrix.Workspace


def _stored_tile_arrays() -> dict:
  """A graph with 200 configs: its config_feat outgrows zipfile's first read (4 KB), so that the
  CRC is checked only once the array is streamed."""
  return graphs.graph_arrays(tile_test_data.tile_graph(np.random.default_rng(2), "g", "valid", 200))


def _crc_damaged(path: pathlib.Path) -> None:
  """An uncompressed npz whose config_feat bytes were altered, near their end, after its CRC was computed."""
  arrays = _stored_tile_arrays()
  npz.write_npz(path, arrays, compress=False)
  content = bytearray(path.read_bytes())
  tail = arrays["config_feat"].tobytes()[-96:]
  content[bytes(content).find(tail) + 48] ^= 0xFF
  path.write_bytes(bytes(content))


def _huge_header(path: pathlib.Path) -> None:
  """An npz whose config_feat header promises a 1.5 TiB array."""
  arrays = _stored_tile_arrays()
  with zipfile.ZipFile(path, "w") as archive:
    for name, array in arrays.items():
      with archive.open(name + ".npy", "w") as stream:
        if name == "config_feat":
          np.lib.format.write_array_header_1_0(stream, {"descr": "<f4", "fortran_order": False,
                                                        "shape": (17_179_869_184, 24)})
          stream.write(array.tobytes())
        else:
          np.lib.format.write_array(stream, array)


def _release_archive(workspace: Workspace, path: pathlib.Path) -> bytes:
  """A tar of the workspace's first two training graphs, as the release packs them."""
  with tarfile.open(path, "w") as archive:
    for source in sorted((workspace.npz_root / "tile/xla/train").glob("*.npz"))[:2]:
      archive.add(source, arcname=f"npz/tile/xla/train/{source.name}")
  return path.read_bytes()


def _damaged(content: bytes) -> bytes:
  """The same number of bytes, with a stretch inside the first member's data overwritten."""
  return content[:1024] + b"\0" * 512 + content[1536:]


ARCHIVE = download.archive_name("tile:xla", "train")


def _download_flags(workspace: Workspace, dest: pathlib.Path) -> list[str]:
  return ["--collections=tile:xla", "--splits=train", f"--dest={dest}", f"--base_url={workspace.release_url}"]


def prepare_download_under_a_file(workspace: Workspace, folder: pathlib.Path) -> Call:
  _release_archive(workspace, workspace.release / ARCHIVE)
  return Call(_download_flags(workspace, fault_matrix.a_file(folder) / "dest"))


def prepare_corrupt_download(workspace: Workspace, folder: pathlib.Path) -> Call:
  good = _release_archive(workspace, folder / "good.tar")
  (workspace.release / ARCHIVE).write_bytes(_damaged(good))  # the server's copy is corrupt, no MD5 to tell
  dest = folder / "dest"

  def check(completed):
    assert (dest / f"{ARCHIVE}.corrupt").read_bytes() == _damaged(good) and not (dest / ARCHIVE).exists()
    (workspace.release / ARCHIVE).write_bytes(good)  # the server is fixed: a rerun fetches and installs
    rerun = fault_matrix.run_program("download", _download_flags(workspace, dest))
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert download.Downloader(dest).is_installed(ARCHIVE)

  return Call(_download_flags(workspace, dest), check=check)


def prepare_corrupt_kept_archive(workspace: Workspace, folder: pathlib.Path) -> Call:
  dest = folder / "dest"
  dest.mkdir()
  good = _release_archive(workspace, folder / "good.tar")
  (workspace.release / ARCHIVE).write_bytes(good)
  (dest / ARCHIVE).write_bytes(_damaged(good))  # kept by an earlier run: right size, corrupt

  def check(completed):
    assert download.Downloader(dest).is_installed(ARCHIVE)
    assert (dest / f"{ARCHIVE}.corrupt").read_bytes() == _damaged(good)

  return Call(_download_flags(workspace, dest), check=check)


def prepare_truncated_shard(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"
  shutil.copytree(workspace.records.parents[1], output)
  shard = output / "tile/xla/train/configs-00000-of-00001.tfrecord.gz"
  intact = shard.read_bytes()
  with open(shard, "r+b") as stream:
    stream.truncate(len(intact) // 2)

  def check(completed):
    assert shard.read_bytes() == intact
    assert "skipped 6 already converted" in completed[0].stdout  # valid and test were intact

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], check=check)


def prepare_two_converters(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"

  def check(completed):
    for name in ("train/manifest.json", "train/configs-00000-of-00001.tfrecord.gz", "valid/shard-00000-of-00001.json"):
      assert (output / "tile/xla" / name).read_bytes() == (workspace.records / name).read_bytes()

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], copies=2, check=check)


def prepare_full_disk_convert(workspace: Workspace, folder: pathlib.Path) -> Call:
  output = folder / "records"

  def check(completed):  # what was written stays valid; the rest follows once there is room
    convert.convert_directory(workspace.npz_root, output, progress=False)
    assert (output / "tile/xla/train/manifest.json").read_bytes() == (workspace.records / "train/manifest.json").read_bytes()

  return Call([f"--input_dir={workspace.npz_root}", f"--output_dir={output}"], file_size_limit=3000, check=check)


def _tree_with(kind: Callable[[pathlib.Path], None], folder: pathlib.Path) -> pathlib.Path:
  """<folder>/npz: a tile tree holding bad.npz, made by `kind`, beside a good graph."""
  kind(fault_matrix.tile_dir(folder) / "bad.npz")
  return folder / "npz"


def _stats_of(kind):
  return fault_matrix.with_flags(lambda workspace, folder: [f"--data_dir={_tree_with(kind, folder)}"])


def _convert_of(kind):
  return fault_matrix.with_flags(lambda workspace, folder: [f"--input_dir={_tree_with(kind, folder)}", f"--output_dir={folder / 'records'}"])


def _featurize_fifo(workspace, folder):
  os.mkfifo(folder / "in.pb")
  return [f"--input={folder / 'in.pb'}", f"--output_dir={folder / 'out'}"]


def prepare_convert_empty_folder(workspace: Workspace, folder: pathlib.Path) -> Call:
  (folder / "empty").mkdir()

  def check(completed):
    assert not (folder / "records").exists()

  return Call([f"--input_dir={folder / 'empty'}", f"--output_dir={folder / 'records'}"], check=check)


def prepare_convert_graph_id_with_colon(workspace: Workspace, folder: pathlib.Path) -> Call:
  split_dir = fault_matrix.tile_dir(folder, "test")
  shutil.copy(split_dir / "good.npz", split_dir / "a:b.npz")

  def check(completed):  # refused before the good file was converted
    assert not (folder / "records").exists()

  return Call([f"--input_dir={folder / 'npz'}", f"--output_dir={folder / 'records'}"], check=check)


def prepare_convert_unusual_file_name(workspace: Workspace, folder: pathlib.Path) -> Call:
  split_dir = fault_matrix.tile_dir(folder, "test")
  shutil.copy(split_dir / "good.npz", split_dir / f"{fault_matrix.UNUSUAL_NAME}.npz")

  def check(completed):
    assert len(list((folder / "records" / "tile" / "xla" / "test").glob("*.tfrecord.gz"))) >= 1

  return Call([f"--input_dir={folder / 'npz'}", f"--output_dir={folder / 'records'}"], check=check)


CASES = [
    Case("stats_fifo_named_npz", "stats", _stats_of(fault_matrix.special_file("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("stats_dangling_symlink", "stats", _stats_of(fault_matrix.special_file("dangling")), r"bad\.npz: a dangling symbolic link"),
    Case("stats_directory_named_npz", "stats", _stats_of(fault_matrix.special_file("directory")), r"bad\.npz: a directory, not a file"),
    Case("stats_header_claims_1_5_tib", "stats", _stats_of(_huge_header), r"bad\.npz: 'config_feat' header promises"),
    Case("convert_fifo_named_npz", "convert", _convert_of(fault_matrix.special_file("fifo")), r"bad\.npz: a FIFO \(named pipe\)"),
    Case("convert_crc_error_in_streamed_array", "convert", _convert_of(_crc_damaged),
         r"bad\.npz: 'config_feat' is unreadable \(BadZipFile: Bad CRC-32 for file 'config_feat\.npy'\)"),
    Case("convert_empty_folder", "convert", prepare_convert_empty_folder, r"empty: no \.npz files below this folder"),
    Case("convert_graph_id_with_colon", "convert", prepare_convert_graph_id_with_colon,
         r"a:b\.npz: graph id 'a:b' \(the file name\) cannot end the ID '<collection>:<graph id>' of its "
         r"prediction rows, which is split at ':'; rename the file without ':'"),
    Case("convert_file_name_with_spaces_and_non_ascii", "convert", prepare_convert_unusual_file_name,
         r"Converted 2 graphs", status=0),
    Case("convert_output_under_a_file", "convert",
         fault_matrix.with_flags(lambda workspace, folder: [f"--input_dir={workspace.npz_root}", f"--output_dir={fault_matrix.a_file(folder)}/records"]),
         r"a_file/records.*: Not a directory|a_file: File exists"),
    Case("convert_into_a_read_only_folder", "convert",
         fault_matrix.with_flags(lambda workspace, folder: [f"--input_dir={workspace.npz_root}",
                                          f"--output_dir={fault_matrix.read_only_folder(folder)}/records"]),
         r"read_only/records.*: Permission denied", unprivileged=True),
    Case("convert_disk_full_then_rerun", "convert", prepare_full_disk_convert, r"\.tfrecord\.gz: File too large"),
    Case("convert_truncated_finished_shard_is_redone", "convert", prepare_truncated_shard,
         r"configs-00000-of-00001\.tfrecord\.gz has \d+ bytes, \d+ were written; converting the shard again", status=0),
    Case("convert_two_converters_in_one_folder", "convert", prepare_two_converters, r"Converted \d+ graphs, skipped \d+ already converted", status=0),
    Case("convert_beam_unknown_pipeline_option", "convert_beam",
         fault_matrix.flags_only("--input_dir={embedded}", "--output_dir={case}/records", "--", "--direct_num_workerz=2"),
         r"Beam pipeline options: unknown option\(s\) --direct_num_workerz"),
    Case("featurize_fifo_input", "featurize", fault_matrix.with_flags(_featurize_fifo), r"in\.pb: a FIFO \(named pipe\)"),
    Case("generate_unknown_architecture", "generate", fault_matrix.flags_only("--architectures=resnet50,bogus", "--output_dir={case}/gen"),
         r"--architectures: unknown architecture\(s\) 'bogus'"),
    Case("download_unknown_collection", "download", fault_matrix.flags_only("--collections=tile:tpu", "--dest={case}/dest"),
         r"--collections: unknown collection 'tile:tpu'"),
    Case("download_dest_under_a_file", "download", prepare_download_under_a_file,
         r"a_file.*: Not a directory|a_file: File exists"),
    Case("download_corrupt_archive_without_md5", "download", prepare_corrupt_download,
         rf"{ARCHIVE}: corrupt, moved it to .*{ARCHIVE}\.corrupt \(a rerun fetches it again\)"),
    Case("download_corrupt_archive_kept_by_an_earlier_run", "download", prepare_corrupt_kept_archive,
         rf"{ARCHIVE}: kept from an earlier run but corrupt, moved it to .*\.corrupt; fetching it again", status=0),
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
