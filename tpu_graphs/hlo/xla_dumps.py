"""Modules XLA dumps itself: TF/Keras programs compiled in a fresh process with
XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_proto, the `HloProto` files a compiler engineer
holds (`*.before_optimizations.hlo.pb`, the whole program; `*.cpu_after_optimizations.hlo.pb`,
after fusion). The featurizers read them as they are (hlo_input.parse_hlo_proto, native/hlo).

Three small programs of the kinds the release holds: a CNN, an RNN (an LSTM over tokens) and a
transformer block (self-attention and an MLP, each with a residual and layer norm).

    dumps = dump_programs(["cnn", "transformer_block"], "out/dumps")
    dumps["cnn"].before_optimizations   # a pathlib.Path
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
from typing import Callable, Sequence, Union

import tensorflow as tf


def _cnn() -> tuple[tf.keras.Model, tf.TensorSpec]:
  inputs = tf.keras.Input([32, 32, 3])
  x = tf.keras.layers.Conv2D(16, 3, activation="relu")(inputs)
  x = tf.keras.layers.MaxPooling2D()(x)
  x = tf.keras.layers.Conv2D(32, 3, activation="relu")(x)
  x = tf.keras.layers.GlobalAveragePooling2D()(x)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(10)(x), name="cnn"), tf.TensorSpec([4, 32, 32, 3])


def _rnn() -> tuple[tf.keras.Model, tf.TensorSpec]:
  inputs = tf.keras.Input([16], dtype=tf.int32)
  x = tf.keras.layers.Embedding(256, 32)(inputs)
  x = tf.keras.layers.LSTM(32)(x)
  return tf.keras.Model(inputs, tf.keras.layers.Dense(4)(x), name="rnn"), tf.TensorSpec([4, 16], tf.int32)


def _transformer_block() -> tuple[tf.keras.Model, tf.TensorSpec]:
  inputs = tf.keras.Input([32, 64])
  attended = tf.keras.layers.MultiHeadAttention(num_heads=4, key_dim=16)(inputs, inputs)
  x = tf.keras.layers.LayerNormalization()(inputs + attended)
  hidden = tf.keras.layers.Dense(128, activation="gelu")(x)
  x = tf.keras.layers.LayerNormalization()(x + tf.keras.layers.Dense(64)(hidden))
  return tf.keras.Model(inputs, x, name="transformer_block"), tf.TensorSpec([2, 32, 64])


# Program name -> () -> (its Keras model, the input it is compiled for).
PROGRAMS: dict[str, Callable[[], tuple[tf.keras.Model, tf.TensorSpec]]] = {
    "cnn": _cnn, "rnn": _rnn, "transformer_block": _transformer_block}


@dataclasses.dataclass(frozen=True)
class DumpedModule:
  """The two HloProto files XLA dumps for a program's forward pass."""

  before_optimizations: pathlib.Path
  after_optimizations: pathlib.Path


def _forward(name: str) -> tuple[Callable, tf.TensorSpec]:
  """The program's forward pass as a jit-compiled function named `<program>_forward` (the name XLA's
  dump files carry), and its input."""
  model, spec = PROGRAMS[name]()

  def forward(inputs):
    return model(inputs, training=False)

  forward.__name__ = f"{name}_forward"
  return tf.function(forward, jit_compile=True, autograph=False), spec


def _compile(names: Sequence[str]) -> None:
  """Runs each program's forward pass once on zeros: XLA compiles it and, asked by XLA_FLAGS, dumps."""
  for name in names:
    forward, spec = _forward(name)
    forward(tf.zeros(spec.shape, spec.dtype))


def dump_programs(names: Sequence[str], directory: Union[str, os.PathLike]) -> dict[str, DumpedModule]:
  """Compiles the named PROGRAMS in a fresh Python (XLA reads its flags once per process) with XLA
  dumping its modules as protos into `directory`; returns each program's two dumps.

  Raises:
    RuntimeError: the compiling process failed, or XLA wrote no dump for a program.
  """
  directory = pathlib.Path(directory)
  unknown = sorted(set(names) - set(PROGRAMS))
  if unknown:
    raise ValueError(f"unknown programs {unknown}; known: {sorted(PROGRAMS)}")
  environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path)), "TF_CPP_MIN_LOG_LEVEL": "3",
                 "XLA_FLAGS": f"--xla_dump_to={directory} --xla_dump_hlo_as_proto"}
  completed = subprocess.run([sys.executable, "-m", __name__, *names], env=environment, capture_output=True, text=True,
                             check=False)
  if completed.returncode:
    raise RuntimeError(f"compiling {', '.join(names)} with XLA dumps failed:\n{completed.stderr[-3000:]}")
  dumps = {}
  for name in names:
    found = {stage: sorted(directory.glob(f"*_{name}_forward_*.{stage}.hlo.pb"))
             for stage in ("before_optimizations", "cpu_after_optimizations")}
    if not all(found.values()):
      raise RuntimeError(f"XLA wrote no dump of {name} into {directory}")
    dumps[name] = DumpedModule(found["before_optimizations"][-1], found["cpu_after_optimizations"][-1])
  return dumps


if __name__ == "__main__":
  _compile(sys.argv[1:])
