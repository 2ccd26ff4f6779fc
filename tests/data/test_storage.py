"""Atomic writes on local disks and on file systems reached through URLs (TensorFlow's ram://)."""

import errno
import hashlib
import os
import pathlib
import sys
import uuid

import pytest
import tensorflow as tf

import memory_file_system
from tpu_graphs.data import storage


@pytest.fixture
def ram_dir():
  """A fresh folder of TensorFlow's in-memory file system (a URL, as gs:// is)."""
  directory = f"ram://storage-test-{uuid.uuid4().hex}"
  tf.io.gfile.makedirs(directory)
  yield directory
  tf.io.gfile.rmtree(directory)


def test_atomic_write_refuses_to_replace_a_device_or_folder(tmp_path):
  (tmp_path / "folder").mkdir()
  for target in [tmp_path / "folder"] + [pathlib.Path("/dev/full")] * os.path.exists("/dev/full"):
    with pytest.raises(FileExistsError, match="refusing to replace it"), storage.atomic_path(target) as temporary:
      temporary.write_text("never")
  assert [p.name for p in tmp_path.iterdir()] == ["folder"] and not list((tmp_path / "folder").iterdir())


def test_failed_write_names_the_final_path_not_the_temporary(tmp_path):
  with pytest.raises(FileNotFoundError) as raised, storage.atomic_path(tmp_path / "missing" / "x.json"):
    pass
  assert raised.value.filename == str(tmp_path / "missing")
  with pytest.raises(OSError) as raised, storage.atomic_path(tmp_path / "x.json"):
    raise OSError(errno.ENOSPC, "No space left on device")
  assert raised.value.filename == str(tmp_path / "x.json") and raised.value.errno == errno.ENOSPC
  assert not list(tmp_path.iterdir())


def test_urls_are_joined_without_losing_their_scheme():
  assert storage.join("gs://bucket/runs", "tiles", "config.json") == "gs://bucket/runs/tiles/config.json"
  assert storage.join("out/runs", "tiles") == os.path.join("out/runs", "tiles")
  assert storage.scheme("ram://x/y") == "ram" and storage.scheme("/x/y") == "" and storage.is_local("/x/y")
  assert not storage.is_local("gs://bucket/x")


def test_write_on_an_in_memory_file_system_appears_whole_under_its_name(ram_dir):
  path = storage.join(ram_dir, "runs", "config.json")
  tf.io.gfile.makedirs(storage.join(ram_dir, "runs"))
  with storage.atomic_write(path) as stream:
    stream.write('{"epochs": 1}')
    assert not tf.io.gfile.exists(path)  # under its temporary name until the block ends
  assert storage.read_text(path) == '{"epochs": 1}'
  storage.write_text(path, "replaced")
  assert storage.read_text(path) == "replaced"
  assert tf.io.gfile.listdir(storage.join(ram_dir, "runs")) == ["config.json"]


def test_failed_write_on_an_in_memory_file_system_leaves_the_old_file(ram_dir):
  path = storage.join(ram_dir, "metrics.json")
  storage.write_text(path, "old")
  with pytest.raises(RuntimeError, match="killed"), storage.atomic_write(path) as stream:
    stream.write("half")
    raise RuntimeError("killed")
  assert storage.read_text(path) == "old" and tf.io.gfile.listdir(ram_dir) == ["metrics.json"]


def test_without_atomic_rename_a_copy_is_verified_by_sha256(ram_dir, monkeypatch):
  # As on gs:// or s3://: ram:// counted as a file system that only copies.
  monkeypatch.setattr(storage, "ATOMIC_RENAME_SCHEMES", frozenset({""}))
  path = storage.join(ram_dir, "shard.json")
  storage.write_bytes(path, b"finished shard")
  assert storage.sha256(path) == hashlib.sha256(b"finished shard").hexdigest()
  with tf.io.gfile.GFile(path, "rb") as stream:
    assert stream.read() == b"finished shard"
  assert tf.io.gfile.listdir(ram_dir) == ["shard.json"]  # the temporary is gone
  copy = tf.io.gfile.copy

  def corrupting_copy(source, target, overwrite=False):
    copy(source, target, overwrite)
    with tf.io.gfile.GFile(target, "wb") as stream:
      stream.write(b"torn")

  monkeypatch.setattr(tf.io.gfile, "copy", corrupting_copy)
  with pytest.raises(OSError, match="does not have the sha256 written"):
    storage.write_bytes(path, b"second")


def test_missing_file_is_file_not_found_on_any_file_system(ram_dir, tmp_path):
  for path in (storage.join(ram_dir, "none.json"), tmp_path / "none.json"):
    with pytest.raises(FileNotFoundError):
      storage.read_text(path)


def test_directory_is_swapped_in_whole_locally_and_on_an_in_memory_file_system(ram_dir, tmp_path):
  def write(version):
    def fill(directory):
      tf.io.gfile.makedirs(storage.join(directory, "variables"))
      storage.write_text(storage.join(directory, "saved_model.pb"), version)
      storage.write_text(storage.join(directory, "variables", "data"), version * 2)
    return fill

  for parent in (ram_dir, str(tmp_path)):
    path = storage.join(parent, "export")
    storage.atomic_directory(path, write("a"))
    storage.atomic_directory(path, write("b"))
    assert storage.read_text(storage.join(path, "saved_model.pb")) == "b"
    assert storage.read_text(storage.join(path, "variables", "data")) == "bb"
    assert [name.rstrip("/") for name in tf.io.gfile.listdir(parent)] == ["export"]


def test_files_below_a_url_are_listed_as_below_a_local_folder(tmp_path):
  # "a-b" sorts before "a/" as a string, after "a" as a folder: the order must be pathlib's.
  ram_dir = memory_file_system.fresh_directory("listing")  # (the fixture's rmtree fails on nested ram:// folders)
  names = ["a/z.npz", "a-b/y.npz", "a/c/x.npz", "a/notes.txt", "b.npz/inside.npz"]
  for parent in (ram_dir, str(tmp_path)):
    for name in names:
      storage.makedirs(storage.parent(storage.join(parent, name)))
      storage.write_bytes(storage.join(parent, name), name.encode())
  local = storage.files_below(tmp_path, "*.npz")
  remote = storage.files_below(ram_dir, "*.npz")
  assert all(isinstance(path, pathlib.Path) for path in local) and all(isinstance(path, str) for path in remote)
  assert [storage.relative_path(path, ram_dir) for path in remote] == [
      storage.relative_path(path, tmp_path) for path in local] == [
          "a/c/x.npz", "a/z.npz", "a-b/y.npz", "b.npz", "b.npz/inside.npz"]
  assert [storage.file_size(path) for path in remote if not path.endswith("b.npz")] == [9, 7, 9, 16]
  assert storage.file_problem(storage.join(ram_dir, "b.npz")) == "a directory, not a file"


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
