"""The tf.train.Example bytes of a GraphTensor, as tfgnn.write_example(...).SerializeToString(
deterministic=True) gives them, written from each feature's numpy bytes at once.

Converting a dataset is largely serializing its records, and the protocol buffer library copies a
feature's values into the message one by one, which was most of the time serializing took
(benchmarks/convert.py times conversion). The wire format is simple
and fixed (protocol buffers' encoding of example.proto and feature.proto), so the bytes are written
here directly; tests/data/test_example_encoding.py holds them equal to TF-GNN's own on real and
generated graphs of both kinds and on the values at the edges of the encoding. TF-GNN reads the
records (tfgnn.parse_example), as it reads its own.
"""

from typing import Iterator

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

# Field numbers of tensorflow/core/example/{example,feature}.proto.
_EXAMPLE_FEATURES = 1       # Example.features
_FEATURES_FEATURE = 1       # Features.feature, a map<string, Feature>
_MAP_KEY, _MAP_VALUE = 1, 2  # a map entry's fields
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3  # Feature's oneof kind
_LIST_VALUE = 1             # {Bytes,Float,Int64}List.value (packed for numbers)
_LENGTH_DELIMITED = 2       # the wire type of every field written here


# Below this many values a Python loop encodes varints faster than numpy's vectorized passes.
_VECTORIZED_VARINTS = 64


def _varint(value: int) -> bytes:
  """One value's varint (see varints); `value` is at least 0 (varints passes the unsigned view)."""
  encoded = bytearray()
  while value >= 0x80:
    encoded.append(value & 0x7F | 0x80)
    value >>= 7
  encoded.append(value)
  return bytes(encoded)


def varints(values: np.ndarray) -> bytes:
  """Protocol buffers' varint encoding of int64 values, one after the other: 7 bits a byte, least
  significant first, the top bit set on every byte but a value's last; a negative value is encoded
  as its 64-bit two's complement (ten bytes)."""
  unsigned = np.asarray(values, np.int64).view(np.uint64).ravel()
  if unsigned.size < _VECTORIZED_VARINTS:
    return b"".join(_varint(value) for value in unsigned.tolist())
  lengths = np.ones(unsigned.shape, np.int64)
  for group in range(1, 10):
    lengths += unsigned >= np.uint64(1) << np.uint64(7 * group)
  encoded = np.empty(int(lengths.sum()), np.uint8)
  starts = np.cumsum(lengths) - lengths
  for group in range(10):
    present = lengths > group
    low_bits = (unsigned[present] >> np.uint64(7 * group)) & np.uint64(0x7F)
    continued = (lengths[present] > group + 1).astype(np.uint64) << np.uint64(7)
    encoded[starts[present] + group] = (low_bits | continued).astype(np.uint8)
  return encoded.tobytes()


def _field(number: int, parts: list[bytes]) -> list[bytes]:
  """A length-delimited field as byte strings to join: its tag, its payload's length, the payload
  (`parts`, kept apart so that a large array's bytes are copied once, into the whole message)."""
  return [_varint(number << 3 | _LENGTH_DELIMITED), _varint(sum(map(len, parts))), *parts]


def _feature(name: str, values: tf.Tensor) -> list[bytes]:
  """A Feature holding the tensor's values flattened, as write_example stores them: strings as a
  BytesList, floats as a packed FloatList of float32, any integer as a packed Int64List."""
  if not isinstance(values, tf.Tensor):
    raise ValueError(f"feature {name!r}: a {type(values).__name__}; only dense tensors are encoded here")
  array = tf.reshape(values, [-1]).numpy()
  if values.dtype == tf.string:
    return _field(_BYTES_LIST, [part for value in array.tolist() for part in _field(_LIST_VALUE, [value])])
  if values.dtype.is_floating:
    kind, packed = _FLOAT_LIST, array.astype("<f4").tobytes()
  else:
    kind, packed = _INT64_LIST, varints(array)
  return _field(kind, _field(_LIST_VALUE, [packed]) if packed else [])


def _named_features(graph_tensor: tfgnn.GraphTensor) -> Iterator[tuple[str, tf.Tensor]]:
  """Every (feature name, values) write_example stores: the context's features, each node set's
  sizes and features, each edge set's sizes, features and adjacency."""
  for name, values in graph_tensor.context.features.items():
    yield f"{tfgnn.CONTEXT}/{name}", values
  for set_name, node_set in graph_tensor.node_sets.items():
    prefix = f"{tfgnn.NODES}/{set_name}."
    yield prefix + tfgnn.SIZE_NAME, node_set.sizes
    yield from ((prefix + name, values) for name, values in node_set.features.items())
  for set_name, edge_set in graph_tensor.edge_sets.items():
    prefix = f"{tfgnn.EDGES}/{set_name}."
    yield prefix + tfgnn.SIZE_NAME, edge_set.sizes
    yield from ((prefix + name, values) for name, values in edge_set.features.items())
    yield prefix + tfgnn.SOURCE_NAME, edge_set.adjacency.source
    yield prefix + tfgnn.TARGET_NAME, edge_set.adjacency.target


def example_bytes(graph_tensor: tfgnn.GraphTensor) -> bytes:
  """The serialized tf.train.Example of an eager GraphTensor with dense features, its map entries in
  key order as deterministic serialization writes them. ValueError for a ragged feature."""
  entries = sorted(((name.encode(), values) for name, values in _named_features(graph_tensor)),
                   key=lambda entry: entry[0])
  features = [part for name, values in entries for part in _field(
      _FEATURES_FEATURE, _field(_MAP_KEY, [name]) + _field(_MAP_VALUE, _feature(name.decode(), values)))]
  return b"".join(_field(_EXAMPLE_FEATURES, features))
