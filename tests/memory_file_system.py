"""Folders of TensorFlow's in-memory file system (ram://): a file system reached by URL, as gs:// is,
for tests of the programs' non-local paths."""

import os
import posixpath
import uuid

import tensorflow as tf


def fresh_directory(name: str) -> str:
  """A new, empty ram:// folder."""
  directory = f"ram://{name}-{uuid.uuid4().hex}"
  tf.io.gfile.makedirs(directory)
  return directory


def tree_bytes(root) -> dict:
  """{path relative to root: bytes} of every file below `root` (a local folder or a URL), leaving
  out the local converter's lock files, which only local folders have."""
  root = os.fspath(root)
  files = {}
  for directory, _, names in tf.io.gfile.walk(root):
    for name in names:
      if name == ".convert.lock":
        continue
      path = posixpath.join(directory, name)
      with tf.io.gfile.GFile(path, "rb") as stream:
        files[posixpath.relpath(path, root)] = stream.read()
  return files


def copy_tree(local_root, name: str) -> str:
  """A new ram:// folder holding a copy of every file below the local folder `local_root`."""
  directory = fresh_directory(name)
  for relative, data in tree_bytes(local_root).items():
    path = posixpath.join(directory, relative)
    tf.io.gfile.makedirs(posixpath.dirname(path))
    with tf.io.gfile.GFile(path, "wb") as stream:
      stream.write(data)
  return directory
