"""The dataset's opcode numbering agrees with the release's files."""

import collections
import sys

import numpy as np
import pytest

import sample_data
from tpu_graphs.data import npz
from tpu_graphs.hlo import opcodes


def test_ids_are_the_frozen_list():
  assert len(opcodes.OPCODE_IDS) == 120 and set(opcodes.OPCODE_IDS.values()) == set(range(1, 121))
  assert opcodes.OPCODE_IDS["convolution"] == 26 and opcodes.OPCODE_IDS["tan"] == 120
  assert {opcodes.OPCODE_IDS[name] for name in opcodes.RETIRED_OPCODES} == {97, 101}
  assert all(opcodes.OPCODE_NAMES[i] == name for name, i in opcodes.OPCODE_IDS.items())


def test_release_configurable_nodes_are_convolutions_dots_and_reshapes():
  """The release configures only these ops' layouts, so their ids must land on them."""
  for path in sorted(sample_data.require_sample("npz/layout").rglob("*.npz")):
    graph = npz.read_graph(path)
    names = collections.Counter(opcodes.OPCODE_NAMES[int(o)] for o in graph.node_opcode[graph.node_config_ids])
    assert set(names) <= {"convolution", "dot", "reshape"}, (path, names)


def test_release_parameters_have_parameter_numbers():
  graph = npz.read_graph(sample_data.require_sample("npz/layout/xla/default/valid/unet_3d.4x4.bf16.npz"))
  parameter_numbers = graph.node_feat[graph.node_opcode == opcodes.OPCODE_IDS["parameter"], 30]
  assert parameter_numbers.size and np.all(parameter_numbers >= 0)
  assert np.any(parameter_numbers > 0)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
