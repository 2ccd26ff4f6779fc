"""Serialized HLO as it reaches us: bytes or a .pb file holding a ModuleTuningData, TuningData,
HloModuleProto or HloProto (XLA's --xla_dump_hlo_as_proto), told apart by what each kind always
carries (native/hlo/hlo_input.cc reads the same kinds)."""

from __future__ import annotations

import os
from typing import Union

from google.protobuf import message as protobuf_message
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.data import storage
from tpu_graphs.hlo import tuning_pb2
from tpu_graphs.hlo import work_limits

# HLO text (HloModule::ToString, XLA's *.txt dumps) starts so: no proto, refused as such.
_HLO_TEXT_START = b"HloModule "

HloProto = Union[hlo_pb2.HloModuleProto, tuning_pb2.ModuleTuningData, tuning_pb2.TuningData]


def _looks_like_module(module) -> bool:
  return bool(module.computations) and all(c.instructions for c in module.computations) and all(
      i.opcode for c in module.computations for i in c.instructions)


def _is_plausibly(parsed) -> bool:
  """Whether a successful parse is plausibly the message it was parsed as.

  Protobuf parsing accepts bytes of another message type whenever the wire types happen to
  agree, so the content decides: each kind must carry what its producer always writes. Tuning
  data may have no runs yet (nothing measured); a program's still lists its configurable nodes.
  """
  if isinstance(parsed, tuning_pb2.TuningData):
    return bool(parsed.modules) and all(
        _looks_like_module(m.module) and all(r.WhichOneof("config") == "op_config" for r in m.runs)
        for m in parsed.modules)
  if isinstance(parsed, tuning_pb2.ModuleTuningData):
    return (_looks_like_module(parsed.module) and bool(parsed.config_index_to_node)
            and all(r.WhichOneof("config") == "module_config" for r in parsed.runs))
  if isinstance(parsed, hlo_pb2.HloProto):
    return _looks_like_module(parsed.hlo_module)
  return _looks_like_module(parsed)


def parse_hlo_message(data: bytes, source: str) -> Union[HloProto, hlo_pb2.HloProto]:
  """Parses serialized bytes as parse_hlo_proto does, but gives an HloProto as it came, wrapper and
  all: what writes a module back in the wrapper it came in (module_writer.py) needs to know it.

  Raises:
    graphs.GraphFileError: the bytes are none of them (not a proto, truncated, or another message).
  """
  if not data:
    raise graphs.GraphFileError(source, "the file is empty")
  if data.lstrip().startswith(_HLO_TEXT_START):
    raise graphs.GraphFileError(source, "holds HLO text (it starts with 'HloModule'), not a serialized proto; pass "
                                "the module as a proto: XLA writes one per module with --xla_dump_hlo_as_proto "
                                "(*.hlo.pb)")
  for kind in (tuning_pb2.ModuleTuningData, tuning_pb2.TuningData, hlo_pb2.HloModuleProto, hlo_pb2.HloProto):
    try:
      parsed = kind.FromString(data)
    except protobuf_message.DecodeError:
      continue
    if _is_plausibly(parsed):
      return parsed
  raise graphs.GraphFileError(source, "not a serialized ModuleTuningData, TuningData, HloModuleProto or HloProto "
                      "(not a protocol buffer, truncated, or missing computations / configurable nodes / runs)")


def parse_hlo_proto(data: bytes, source: str) -> HloProto:
  """Parses serialized bytes as ModuleTuningData, TuningData, HloModuleProto or HloProto (what
  XLA's --xla_dump_hlo_as_proto writes, `*.hlo.pb`), whichever fits; an HloProto gives its module.

  Raises:
    graphs.GraphFileError: the bytes are none of them (not a proto, truncated, or another message).
  """
  parsed = parse_hlo_message(data, source)
  return parsed.hlo_module if isinstance(parsed, hlo_pb2.HloProto) else parsed


def read_hlo_bytes(path: Union[str, os.PathLike], max_bytes: int = work_limits.MAX_MODULE_BYTES) -> bytes:
  """The bytes of a .pb file (local or a URL); work_limits.WorkLimitError, reading no further, where
  it holds more than `max_bytes`."""
  path = storage.as_path(path)
  problem = storage.file_problem(path)
  if problem:
    raise graphs.GraphFileError(path, problem)
  try:
    with storage.open_binary(path) as stream:
      data = stream.read(max_bytes + 1)
  except OSError as error:
    raise graphs.GraphFileError(path, f"cannot read the file ({error.strerror or error})") from None
  except tf.errors.OpError as error:
    raise graphs.GraphFileError(path, f"cannot read the file ({error.message})") from None
  work_limits.check_module_bytes(len(data), work_limits.WorkLimits(max_module_bytes=max_bytes), str(path))
  return data


def read_hlo_file(path: Union[str, os.PathLike], max_bytes: int = work_limits.MAX_MODULE_BYTES) -> HloProto:
  """Reads a .pb file (local or a URL) holding a ModuleTuningData, TuningData, HloModuleProto or HloProto;
  work_limits.WorkLimitError, reading no further, where it holds more than `max_bytes`."""
  return parse_hlo_proto(read_hlo_bytes(path, max_bytes), str(storage.as_path(path)))
