"""Only changes a compiler may make (tpu_graphs/hlo/layout_changes.py): the layouts of the entry
computation's parameters and result belong to the program's caller and those of a layout-
constrained custom call to the custom call, so candidates keep them (the entry's may change where
the caller owns the entry layout, change_entry_layouts), and descriptions mark each tensor's kind
of change. The C++ featurizer (//native:featurize, a fresh process) draws the same candidates."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from featurizer_parity import assert_featurized_alike
from tpu_graphs.hlo import candidates, descriptions, from_tensorflow, layout_changes


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
  """relu(x @ w) + b of a small dense layer, its HLO as TensorFlow hands it out, saved as a .pb file."""
  module = from_tensorflow.hlo_module(lambda x, w, b: tf.nn.relu(tf.linalg.matmul(x, w)) + b,
                                      tf.TensorSpec([8, 16]), tf.TensorSpec([16, 4]), tf.TensorSpec([8, 4]))
  path = tmp_path_factory.mktemp("dense") / "dense.pb"
  path.write_bytes(module.SerializeToString())
  return module, path


def _dot(module):
  return next(i for c in module.computations for i in c.instructions if i.opcode == "dot")


def _fixed_tensors_keep_their_layouts(graph, configurable, kinds_allowed) -> bool:
  """Whether every config sets every tensor of a kind outside `kinds_allowed` to its own layout."""
  values = graph.node_config_feat.reshape(graph.num_configs, -1, 3, 6)
  for j, tensors in enumerate(configurable):
    for t, (own, kind) in enumerate(zip(tensors.own_layouts, tensors.changes)):
      if kind not in kinds_allowed:
        dims = values[:, j, t, :len(own[:4])]
        if not np.all(dims == np.asarray(own[:4])):
          return False
  return True


def test_the_entry_parameters_and_the_tensor_the_root_tuple_forwards_are_the_entrys(dense):
  """TensorFlow's HLO reshapes each parameter before the dot and returns get-tuple-element(tuple(r))."""
  module, _ = dense
  [entry] = [c for c in module.computations if c.id == module.entry_computation_id]
  by_id = {i.id: i for i in entry.instructions}
  kinds = layout_changes.change_kinds(module)
  parameters = {i.id for i in entry.instructions if i.opcode == "parameter"}
  assert {i: kinds.get(i) for i in parameters} == {i: layout_changes.ENTRY_PARAMETER for i in parameters}
  root = by_id[entry.root_id]
  assert root.opcode == "get-tuple-element"
  [forwarded] = by_id[root.operand_ids[0]].operand_ids
  assert kinds[forwarded] == kinds[entry.root_id] == layout_changes.ENTRY_RESULT
  assert _dot(module).id not in kinds


def test_candidates_keep_the_entry_layouts_by_default_and_change_them_when_allowed(dense):
  module, _ = dense
  [kept] = candidates.candidate_graphs(module, 10_000)  # all there are
  [changed] = candidates.candidate_graphs(module, 10_000, change_entry_layouts=True)
  configurable = descriptions.configurable_tensors(module, kept.node_config_ids)
  assert _fixed_tensors_keep_their_layouts(kept, configurable, {layout_changes.INTERNAL})
  assert not _fixed_tensors_keep_their_layouts(changed, configurable, {layout_changes.INTERNAL})
  assert changed.num_configs > kept.num_configs
  def marks(graph):
    described = [descriptions.describe(graph, c, configurable)["layouts"] for c in range(graph.num_configs)]
    return described, {t["change"] for layouts in described for ts in layouts.values() for t in ts.values()}
  moved, marked = marks(changed)
  assert layout_changes.ENTRY_PARAMETER in marked
  assert not set(layout_changes.FIXED_BY_OTHERS) & marks(kept)[1]  # listed beside a moved tensor: "kept"
  line = next(descriptions.summary({"layouts": layouts}) for layouts in moved
              if any(t["change"] == layout_changes.ENTRY_PARAMETER for ts in layouts.values() for t in ts.values()))
  assert "(entry parameter)" in line


def test_a_layout_constrained_custom_calls_operand_keeps_its_layout_even_when_the_entrys_may_change(dense):
  module, _ = dense
  module = type(module).FromString(module.SerializeToString())
  dot = _dot(module)
  consumer = next(i for c in module.computations for i in c.instructions if dot.id in i.operand_ids)
  consumer.opcode, consumer.custom_call_target = "custom-call", "my_kernel"
  consumer.operand_shapes_with_layout.extend(
      next(i for c in module.computations for i in c.instructions if i.id == o).shape for o in consumer.operand_ids)
  assert layout_changes.change_kinds(module)[dot.id] == layout_changes.CUSTOM_CALL
  [graph] = candidates.candidate_graphs(module, 64, change_entry_layouts=True)
  configurable = descriptions.configurable_tensors(module, graph.node_config_ids)
  assert _fixed_tensors_keep_their_layouts(graph, configurable, {layout_changes.INTERNAL, layout_changes.ENTRY_PARAMETER,
                                                                 layout_changes.ENTRY_RESULT})


@pytest.mark.parametrize("flags", [(), ("--change_entry_layouts",)], ids=["default", "change_entry_layouts"])
def test_both_featurizers_draw_the_same_candidates_with_and_without_the_entrys_layouts(dense, flags, tmp_path):
  _, path = dense
  assert_featurized_alike(path, tmp_path, "--num_candidates=40", "--seed=5", *flags)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
