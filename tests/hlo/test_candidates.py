"""Candidate configs of small HLO modules built here (tpu_graphs/hlo/candidates.py): which layouts
and tile sizes are offered, which are kept fixed, how many are drawn and how the seed draws them.
tests/programs/test_rank.py runs the same functions end to end on compiled Keras programs."""

import itertools
import sys

import numpy as np
import pytest
from tensorflow.compiler.xla.service import hlo_pb2

import malformed_modules
from tpu_graphs.data import graphs
from tpu_graphs.hlo import candidates, features, hlo_input, splitmix64, tuning_pb2, work_limits

F32 = 11


def _parameter(name, instruction_id, dims, number):
  return {"name": name, "opcode": "parameter", "id": instruction_id, "dims": dims, "parameter_number": number}


def _dot(instruction_id, operands, dims, lhs_contracting=(2,), rhs_contracting=(0,)):
  return {"name": f"dot.{instruction_id}", "opcode": "dot", "id": instruction_id, "operand_ids": operands, "dims": dims,
          "dot_dimension_numbers": {"lhs_contracting_dimensions": lhs_contracting,
                                    "rhs_contracting_dimensions": rhs_contracting}}


def _negate(instruction_id, operand, dims):
  return {"name": f"negate.{instruction_id}", "opcode": "negate", "id": instruction_id, "operand_ids": [operand],
          "dims": dims}


def _program() -> hlo_pb2.HloModuleProto:
  """p0 (2,3,4) . p1 (4,5) -> dot (2,3,5) -> negate -> reshape (6,5) -> negate, the result.
  Configurable: the dot (node 2; its operands are entry parameters) and the reshape (node 4)."""
  return malformed_modules.module(
      _parameter("p0", 1, [2, 3, 4], 0), _parameter("p1", 2, [4, 5], 1), _dot(3, [1, 2], [2, 3, 5]),
      _negate(4, 3, [2, 3, 5]), {"name": "reshape", "opcode": "reshape", "id": 5, "operand_ids": [4], "dims": [6, 5]},
      _negate(6, 5, [6, 5]))


def _tensor_orders(graph: graphs.LayoutGraph) -> np.ndarray:
  """(c, nc, 3, 2) the configured (two minor-most) dims of each configurable node's three tensors."""
  return graph.node_config_feat.reshape(graph.num_configs, -1, features.LAYOUT_MAX_TENSORS,
                                        features.LAYOUT_MAX_DIMS)[..., :features.CONFIGURED_LAYOUT_DIMS]


# ---- Layouts offered one tensor.

def test_the_default_layout_is_descending_and_a_dim_moves_minor_most_keeping_the_others_order():
  assert candidates.default_layout(3) == (2, 1, 0) and candidates.default_layout(1) == (0,)
  assert candidates.default_layout(0) == ()
  assert candidates.with_minor_most((3, 2, 1, 0), 1) == (1, 3, 2, 0)
  assert candidates.with_minor_most((2, 1, 0), 2) == (2, 1, 0)


def test_candidate_layouts_are_the_default_then_a_different_alternative():
  np.testing.assert_array_equal(candidates.candidate_layouts(3), [[2, 1, 0]])
  np.testing.assert_array_equal(candidates.candidate_layouts(3, (1, 2, 0)), [[2, 1, 0], [1, 2, 0]])
  np.testing.assert_array_equal(candidates.candidate_layouts(2, [1, 0]), [[1, 0]])
  assert candidates.candidate_layouts(0).shape == (1, 0) and candidates.candidate_layouts(3).dtype == np.int64


def _shaped(dims) -> hlo_pb2.HloInstructionProto:
  instruction = hlo_pb2.HloInstructionProto()
  instruction.shape.element_type = F32
  instruction.shape.dimensions.extend(dims)
  return instruction


def _convolution(output_batch_dimension: int) -> hlo_pb2.HloInstructionProto:
  """A 2-D convolution of NHWC input (1,8,8,16) and HWIO kernel (3,3,16,32); its output's batch
  dimension is 0 (an activation) or else 3, its features 1 or 0."""
  convolution = _shaped([1, 8, 8, 32])
  convolution.opcode = "convolution"
  numbers = convolution.convolution_dimension_numbers
  numbers.input_batch_dimension, numbers.input_feature_dimension = 0, 3
  numbers.kernel_input_feature_dimension, numbers.kernel_output_feature_dimension = 2, 3
  numbers.output_batch_dimension = output_batch_dimension
  numbers.output_feature_dimension = 3 if output_batch_dimension == 0 else 1
  return convolution


def test_a_convolution_offers_its_feature_dims_minor_most_and_an_activation_result_its_default_only():
  forward = _convolution(output_batch_dimension=0)
  tensors = [forward, _shaped([1, 8, 8, 16]), _shaped([3, 3, 16, 32])]
  assert candidates.preferred_minor_dims(forward, {}) == [3, 3, 3]
  # Every preferred dim is minor-most already: the two minor-most swapped, the result kept.
  assert candidates.alternative_layouts(forward, tensors, {}) == [None, (2, 3, 1, 0), (2, 3, 1, 0)]
  gradient = _convolution(output_batch_dimension=3)
  assert candidates.preferred_minor_dims(gradient, {}) == [1, 3, 3]
  assert candidates.alternative_layouts(gradient, tensors, {})[0] == (1, 3, 2, 0)


def test_a_dot_offers_its_contracting_and_free_dims_minor_most():
  lhs, rhs = _shaped([2, 3, 4]), _shaped([4, 5, 7])
  lhs.id, rhs.id = 1, 2
  dot = _shaped([2, 3, 5, 7])
  dot.opcode, dot.operand_ids[:] = "dot", [1, 2]
  dot.dot_dimension_numbers.lhs_contracting_dimensions.append(2)
  dot.dot_dimension_numbers.rhs_contracting_dimensions.append(0)
  by_id = {1: lhs, 2: rhs}
  assert candidates.preferred_minor_dims(dot, by_id) == [3, 2, 2]
  assert candidates.alternative_layouts(dot, [dot, lhs, rhs], by_id) == [(2, 3, 1, 0), (1, 2, 0), (1, 2, 0)]
  dot.dot_dimension_numbers.rhs_batch_dimensions.append(2)  # rhs dim 2 no longer free: dim 1 is
  dot.dot_dimension_numbers.lhs_contracting_dimensions[:] = [0]
  assert candidates.preferred_minor_dims(dot, by_id) == [3, 0, 1]
  assert candidates.alternative_layouts(dot, [dot, lhs, rhs], by_id) == [(2, 3, 1, 0), (0, 2, 1), (1, 2, 0)]
  del dot.dot_dimension_numbers.lhs_contracting_dimensions[:]
  dot.dot_dimension_numbers.rhs_contracting_dimensions[:] = [0, 1]
  assert candidates.preferred_minor_dims(dot, by_id) == [3, None, None]
  dot.dot_dimension_numbers.rhs_contracting_dimensions[:] = []
  del dot.dot_dimension_numbers.rhs_batch_dimensions[:]
  del dot.operand_ids[1:]  # no rhs: no rhs dim, whatever the numbers say
  assert candidates.preferred_minor_dims(dot, by_id) == [3, None, None]


def test_a_preferred_dim_beyond_the_tensor_offers_the_swap():
  forward = _convolution(output_batch_dimension=3)
  forward.convolution_dimension_numbers.input_feature_dimension = 4  # the input's rank: no such dim
  forward.convolution_dimension_numbers.kernel_output_feature_dimension = -1
  tensors = [forward, _shaped([1, 8, 8, 16]), _shaped([3, 3, 16, 32])]
  assert candidates.alternative_layouts(forward, tensors, {})[1:] == [(2, 3, 1, 0), (2, 3, 1, 0)]


def test_a_transpose_offers_the_orders_that_make_it_a_bitcast():
  transpose = _shaped([4, 2, 3])
  transpose.opcode, transpose.dimensions[:] = "transpose", [2, 0, 1]
  operand = _shaped([2, 3, 4])
  # Result dim d is operand dim permutation[d]: the operand's default (2, 1, 0) is the result's
  # (0, 2, 1), and the result's default is the operand's (1, 0, 2).
  assert candidates.alternative_layouts(transpose, [transpose, operand], {}) == [(0, 2, 1), (1, 0, 2)]
  identity = _shaped([2, 3])
  identity.opcode, identity.dimensions[:] = "transpose", [0, 1]
  assert candidates.alternative_layouts(identity, [identity, _shaped([2, 3])], {}) == [(0, 1), (0, 1)]
  transpose.dimensions[:] = [2, 0, 0]  # not a permutation: the swaps
  assert candidates.alternative_layouts(transpose, [transpose, operand], {}) == [(1, 2, 0), (1, 2, 0)]
  transpose.dimensions[:] = [1, 0]
  assert candidates.alternative_layouts(transpose, [_shaped([3, 2]), operand], {}) == [(0, 1), (1, 2, 0)]
  transpose.dimensions[:] = [2, 0, 1]
  assert candidates.alternative_layouts(transpose, [transpose, _shaped([6, 4])], {}) == [(1, 2, 0), (0, 1)]


def test_other_tensors_of_rank_two_or_more_offer_their_two_minor_most_dims_swapped():
  add = _shaped([2, 3, 4])
  add.opcode = "add"
  assert candidates.alternative_layouts(add, [add, _shaped([5, 6]), _shaped([7])], {}) == [(1, 2, 0), (0, 1), None]
  assert candidates.alternative_layouts(add, [add, _shaped([2, 3, 4])], {}) == [(1, 2, 0), (1, 2, 0)]
  reverse = _shaped([2, 3, 4])  # its dims, listed in any order, are no transpose's permutation
  reverse.opcode, reverse.dimensions[:] = "reverse", [2, 0, 1]
  assert candidates.alternative_layouts(reverse, [reverse, _shaped([2, 3, 4])], {}) == [(1, 2, 0), (1, 2, 0)]


def test_a_fixed_tensor_keeps_its_own_layout_or_the_default_where_that_is_no_order_of_its_dims():
  shape = _shaped([2, 3, 4]).shape
  np.testing.assert_array_equal(candidates.fixed_layout(shape), [[2, 1, 0]])
  shape.layout.minor_to_major.extend([0, 2, 1])
  np.testing.assert_array_equal(candidates.fixed_layout(shape), [[0, 2, 1]])
  shape.layout.minor_to_major[:] = [0, 0, 1]
  np.testing.assert_array_equal(candidates.fixed_layout(shape), [[2, 1, 0]])
  shape.layout.minor_to_major[:] = [0, 1]
  fixed = candidates.fixed_layout(shape)
  np.testing.assert_array_equal(fixed, [[2, 1, 0]])
  assert fixed.dtype == np.int64


# ---- Combinations drawn.

def test_up_to_count_combinations_are_all_taken_in_order():
  choices = candidates.sampled_layout_choices(np.array([2, 3]), 6, splitmix64.SplitMix64(0))
  np.testing.assert_array_equal(choices, list(itertools.product(range(2), range(3))))
  assert choices.dtype == np.int64



def test_no_layout_variables_is_one_config_of_no_choices_as_natively():
  """A module whose configurable ops have no layout to choose (scalars, tuples): the module's own
  config alone, as native/hlo/candidates.cc's SampledLayoutChoices gives it."""
  choices = candidates.sampled_layout_choices(np.array([], np.int64), 5, splitmix64.SplitMix64(0))
  assert choices.shape == (1, 0) and choices.dtype == np.int64

def _drawn_in_order(sizes, count, seed) -> list:
  """Written out: the default, then rows of uniform draws (floor(u * size)), first come first kept."""
  rng, found = splitmix64.SplitMix64(seed), [tuple([0] * len(sizes))]
  while len(found) < count:
    for row in (rng.random((count, len(sizes))) * sizes).astype(np.int64):
      if tuple(row) not in found and len(found) < count:
        found.append(tuple(row))
  return found


@pytest.mark.parametrize("sizes", [[2, 3, 2], [2, 2, 2, 2, 2, 2, 2]])
def test_more_combinations_than_count_are_the_default_then_distinct_uniform_draws(sizes):
  count = 5 if len(sizes) == 3 else 40
  assert np.prod(sizes) > count
  drawn = candidates.sampled_layout_choices(np.array(sizes), count, splitmix64.SplitMix64(7))
  assert [tuple(row) for row in drawn] == _drawn_in_order(np.array(sizes), count, 7)
  assert drawn.shape == (count, len(sizes)) and drawn.dtype == np.int64
  again = candidates.sampled_layout_choices(np.array(sizes), count, splitmix64.SplitMix64(7))
  np.testing.assert_array_equal(drawn, again)
  assert not np.array_equal(drawn, candidates.sampled_layout_choices(np.array(sizes), count, splitmix64.SplitMix64(8)))


def test_uniform_choices_cover_every_choice_of_each_variable():
  drawn = candidates.uniform_choices(np.array([1, 3, 5]), 300, splitmix64.SplitMix64(1))
  assert drawn.shape == (300, 3) and drawn.dtype == np.int64
  assert [sorted(set(drawn[:, v])) for v in range(3)] == [[0], [0, 1, 2], [0, 1, 2, 3, 4]]


def test_draws_stop_after_twenty_rounds_of_count():
  class Repeating:  # a generator stuck on one value after the first row
    def __init__(self):
      self.calls = 0

    def random(self, shape):
      self.calls += 1
      values = np.full(shape, 0.9)
      values[0] = 0.0 if self.calls > 1 else 0.9
      return values

  rng = Repeating()
  drawn = candidates.sampled_layout_choices(np.array([2, 2]), 3, rng)
  np.testing.assert_array_equal(drawn, [[0, 0], [1, 1]])
  assert rng.calls == 20


# ---- A program's layout candidates.

def test_program_candidates_are_every_combination_when_few_default_first():
  graph = candidates.program_candidates(_program(), 100, seed=3)
  assert (graph.graph_id, graph.collection, graph.split) == ("m", "layout:xla:default", "test")
  np.testing.assert_array_equal(graph.node_config_ids, [2, 4])  # the dot and the reshape
  assert graph.num_configs == 8 and not graph.config_runtime.any()
  orders = _tensor_orders(graph)
  # dot: its result (2,3,5) at the default or its two minor-most dims swapped (the dim a dot's
  # result prefers, the last, is minor-most already); its operands, entry parameters, keep their
  # own layouts. reshape: its result (6,5) and operand (2,3,5) at the default or swapped.
  expected = [[[result, [2, 1], [1, 0]], [reshaped, operand, [-1, -1]]]
              for result, reshaped, operand in itertools.product([[2, 1], [1, 2]], [[1, 0], [0, 1]], [[2, 1], [1, 2]])]
  np.testing.assert_array_equal(orders, expected)
  # Beyond the configured dims nothing is written.
  rest = graph.node_config_feat.reshape(8, 2, 3, 6)[..., features.CONFIGURED_LAYOUT_DIMS:]
  assert (rest == -1).all()


def test_program_candidates_are_drawn_down_to_the_count_asked_alike_for_a_seed():
  drawn = candidates.program_candidates(_program(), 5, seed=3)
  assert drawn.num_configs == 5
  every = {tuple(config.ravel()) for config in candidates.program_candidates(_program(), 100).node_config_feat}
  configs = [tuple(config.ravel()) for config in drawn.node_config_feat]
  assert len(set(configs)) == 5 and set(configs) <= every
  np.testing.assert_array_equal(drawn.node_config_feat[0], candidates.program_candidates(_program(), 1).node_config_feat[0])
  np.testing.assert_array_equal(drawn.node_config_feat, candidates.program_candidates(_program(), 5, seed=3).node_config_feat)
  assert any(not np.array_equal(drawn.node_config_feat, candidates.program_candidates(_program(), 5, seed=s).node_config_feat)
             for s in (4, 5))
  assert candidates.program_candidates(_program(), 1).num_configs == 1
  default_seed = candidates.program_candidates(_program(), 5).node_config_feat
  np.testing.assert_array_equal(default_seed, candidates.program_candidates(_program(), 5, seed=0).node_config_feat)
  assert not np.array_equal(default_seed, candidates.program_candidates(_program(), 5, seed=1).node_config_feat)


def test_entry_layouts_change_only_when_the_caller_owns_them():
  module = _program()
  module.computations[0].instructions[1].shape.layout.minor_to_major.extend([0, 1])  # p1 column-major
  fixed = _tensor_orders(candidates.program_candidates(module, 100))
  assert (fixed[:, 0, 1] == [2, 1]).all() and (fixed[:, 0, 2] == [0, 1]).all()
  free = _tensor_orders(candidates.program_candidates(module, 100, change_entry_layouts=True))
  assert {tuple(o) for o in free[:, 0, 1]} == {(2, 1), (1, 2)} and {tuple(o) for o in free[:, 0, 2]} == {(1, 0), (0, 1)}
  assert len(free) == 32


def test_an_entry_result_keeps_its_layout():
  module = _program()
  del module.computations[0].instructions[-1]  # the reshape (6,5) is the result now
  module.computations[0].root_id = 5
  orders = _tensor_orders(candidates.program_candidates(module, 100))
  assert {tuple(o) for o in orders[:, 1, 0]} == {(1, 0)} and len(orders) == 4


def test_a_constrained_custom_calls_tensors_keep_their_layouts():
  module = malformed_modules.module(
      _parameter("p0", 1, [2, 3, 4], 0), _parameter("p1", 2, [4, 5], 1), _negate(3, 1, [2, 3, 4]),
      _negate(4, 2, [4, 5]), _dot(5, [3, 4], [2, 3, 5]),
      {"name": "custom", "opcode": "custom-call", "id": 6, "operand_ids": [5], "dims": [2, 3, 5],
       "custom_call_target": "f", "operand_shapes_with_layout": [{"element_type": F32, "dimensions": [2, 3, 5]}]},
      _negate(7, 6, [2, 3, 5]))
  module.computations[0].instructions[4].shape.layout.minor_to_major.extend([0, 1, 2])
  graph = candidates.program_candidates(module, 100)
  orders = _tensor_orders(graph)
  assert len(orders) == 4 and (orders[:, 0, 0] == [0, 1]).all()  # the dot's result: the custom call's operand
  assert {tuple(o) for o in orders[:, 0, 1]} == {(2, 1), (1, 2)} and {tuple(o) for o in orders[:, 0, 2]} == {(1, 0), (0, 1)}


def test_configurable_nodes_given_are_the_ones_configured():
  graph = candidates.program_candidates(_program(), 100, configurable=[4], graph_id="g", collection="layout:nlp:random",
                                        source="here.pb")
  np.testing.assert_array_equal(graph.node_config_ids, [4])
  assert (graph.graph_id, graph.collection, graph.num_configs) == ("g", "layout:nlp:random", 4)
  first_and_last = candidates.program_candidates(_program(), 100, configurable=[0, 5])  # p0 (fixed), the result
  np.testing.assert_array_equal(first_and_last.node_config_ids, [0, 5])
  assert first_and_last.num_configs == 2
  # A scalar or tuple tensor has no layout: an entry parameter of rank 0 leaves its slot unset.
  module = _program()
  del module.computations[0].instructions[0].shape.dimensions[:]
  module.computations[0].instructions[2].dot_dimension_numbers.lhs_contracting_dimensions[:] = []
  scalar = _tensor_orders(candidates.program_candidates(module, 100, configurable=[2]))
  assert (scalar[:, 0, 1] == -1).all() and (scalar[:, 0, 2] == [1, 0]).all()


@pytest.mark.parametrize("configurable, message", [([6], r"here.pb: config_index_to_node holds 6, beyond the 6 nodes"),
                                                    ([-1], r"here.pb: config_index_to_node holds -1, beyond the 6")])
def test_configurable_nodes_beyond_the_module_are_refused(configurable, message):
  with pytest.raises(graphs.GraphFileError, match=message):
    candidates.program_candidates(_program(), 10, configurable=configurable, source="here.pb")


def test_a_program_without_configurable_ops_or_candidates_is_refused():
  module = malformed_modules.module(_parameter("p0", 1, [2, 3], 0), _negate(2, 1, [2, 3]))
  with pytest.raises(graphs.GraphFileError, match=r"HLO module 'm'.* has no convolution, dot or reshape"):
    candidates.program_candidates(module, 10)
  for count in (0, -1):
    with pytest.raises(ValueError, match=f"num_candidates must be positive, got {count}"):
      candidates.program_candidates(_program(), count)


def test_program_candidates_beyond_the_config_memory_limit_are_refused():
  limits = work_limits.WorkLimits(max_config_bytes=8 * 2 * graphs.LAYOUT_CONFIG_FEATURE_WIDTH * 4 - 1)
  with pytest.raises(work_limits.WorkLimitError):
    candidates.program_candidates(_program(), 100, limits=limits)
  assert candidates.program_candidates(_program(), 7, limits=limits).num_configs == 7


# ---- Tile sizes of a kernel.

def test_tile_sizes_are_the_largest_powers_of_two_below_the_extent_and_the_extent():
  assert candidates.tile_sizes(10, 5) == [1, 2, 4, 8, 10]
  assert candidates.tile_sizes(64, 5) == [4, 8, 16, 32, 64]
  assert candidates.tile_sizes(64, 4) == [8, 16, 32, 64]
  assert candidates.tile_sizes(1, 5) == [1] and candidates.tile_sizes(2, 5) == [1, 2]
  assert candidates.tile_sizes(0, 5) == [0]


def test_tile_candidates_are_every_combination_when_few():
  pairs = candidates.tile_candidates([2, 3], None, splitmix64.SplitMix64(0))
  assert pairs == [((a, b), ()) for a in (1, 2) for b in (1, 2, 3)]
  pairs = candidates.tile_candidates([2], [4, 3], splitmix64.SplitMix64(0))
  assert pairs == [((a,), (f, g)) for a in (1, 2) for f in (1, 2, 4) for g in (1, 2, 3)]


def test_more_tile_combinations_than_the_maximum_are_drawn_distinct_in_sorted_order():
  # 5 * 5 * 5 * 5 * 4 = 2500 > 2000 combinations.
  # Seed 7's 2001st draw would be new: the count of draws shows.
  pairs = candidates.tile_candidates([64, 64, 64, 64], [64], splitmix64.SplitMix64(7))
  assert 1000 < len(pairs) < candidates.MAX_TILE_CANDIDATES and len(set(pairs)) == len(pairs)
  assert pairs == sorted(pairs)
  assert all(len(output) == 4 and len(kernel) == 1 for output, kernel in pairs)
  rng, axes = splitmix64.SplitMix64(7), [[4, 8, 16, 32, 64]] * 4 + [[8, 16, 32, 64]]  # written out: 2000 draws
  picks = {tuple(int(rng.integers(len(a))) for a in axes) for _ in range(2000)}
  assert pairs == [(tuple(a[i] for a, i in zip(axes[:4], pick[:4])), (axes[4][pick[4]],)) for pick in sorted(picks)]
  assert pairs == candidates.tile_candidates([64, 64, 64, 64], [64], splitmix64.SplitMix64(7))
  assert pairs != candidates.tile_candidates([64, 64, 64, 64], [64], splitmix64.SplitMix64(3))
  assert len(candidates.tile_candidates([64, 64, 64, 8], [8], splitmix64.SplitMix64(2))) == 2000  # 5^3 * 4 * 4: all


def test_sampled_indices_are_distinct_sorted_and_a_function_of_the_draws():
  drawn = candidates.sampled_indices(50, 10, splitmix64.SplitMix64(4))
  assert len(set(drawn)) == 10 and drawn == sorted(drawn) and all(0 <= i < 50 for i in drawn)
  assert drawn == candidates.sampled_indices(50, 10, splitmix64.SplitMix64(4))
  assert candidates.sampled_indices(5, 5, splitmix64.SplitMix64(4)) == [0, 1, 2, 3, 4]
  rng = splitmix64.SplitMix64(4)  # written out: a partial Fisher-Yates shuffle
  order = list(range(50))
  for i in range(10):
    j = i + rng.integers(50 - i)
    order[i], order[j] = order[j], order[i]
  assert drawn == sorted(order[:10])


def _kernel(convolution: bool = True, tuple_result: bool = False) -> hlo_pb2.HloModuleProto:
  """A kernel module: a fusion (entry root, (1,8,8,32)) of a 2-D convolution (1,8,8,16) * (3,3,16,32),
  or of a negate; its result a tuple of the fusion where asked."""
  kernel = hlo_pb2.HloModuleProto(name="fusion.7", entry_computation_id=1)
  fused = kernel.computations.add(name="fused", id=2)
  for name, instruction_id, dims, number in [("x", 20, [1, 8, 8, 16], 0), ("w", 21, [3, 3, 16, 32], 1)]:
    if convolution or number == 0:
      fused.instructions.add().CopyFrom(_instruction(_parameter(name, instruction_id, dims, number)))
  if convolution:
    inner = _convolution(output_batch_dimension=0)
    inner.name, inner.id, inner.operand_ids[:] = "convolution", 22, [20, 21]
    inner.window.dimensions.add(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=1)
    inner.window.dimensions.add(size=3, stride=1, padding_low=1, padding_high=1, window_dilation=1, base_dilation=1)
    numbers = inner.convolution_dimension_numbers
    numbers.input_spatial_dimensions.extend([1, 2])
    numbers.kernel_spatial_dimensions.extend([0, 1])
    numbers.output_spatial_dimensions.extend([1, 2])
  else:
    inner = _instruction(_negate(22, 20, [1, 8, 8, 32]))
  fused.instructions.add().CopyFrom(inner)
  fused.root_id = 22
  entry = kernel.computations.add(name="main", id=1)
  entry.instructions.add().CopyFrom(_instruction(_parameter("a", 1, [1, 8, 8, 16], 0)))
  operands = [1]
  if convolution:
    entry.instructions.add().CopyFrom(_instruction(_parameter("b", 2, [3, 3, 16, 32], 1)))
    operands = [1, 2]
  entry.instructions.add().CopyFrom(_instruction({"name": "fusion", "opcode": "fusion", "id": 3, "operand_ids": operands,
                                                  "dims": [1, 8, 8, 32], "called_computation_ids": [2],
                                                  "fusion_kind": "kOutput"}))
  entry.root_id = 3
  if tuple_result:
    root = entry.instructions.add(name="tuple", opcode="tuple", id=4, operand_ids=[3])
    root.shape.element_type = 13  # TUPLE
    root.shape.tuple_shapes.add().CopyFrom(entry.instructions[-2].shape)
    entry.root_id = 4
  return kernel


def _instruction(fields: dict) -> hlo_pb2.HloInstructionProto:
  instruction = hlo_pb2.HloInstructionProto(**{key: value for key, value in fields.items() if key != "dims"})
  instruction.shape.element_type = F32
  instruction.shape.dimensions.extend(fields.get("dims", []))
  return instruction


def test_a_kernels_extents_are_its_results_dims_and_its_convolutions_feature_counts():
  assert candidates.kernel_extents(_kernel()) == ((1, 8, 8, 32), (16, 32))
  assert candidates.kernel_extents(_kernel(tuple_result=True)) == ((1, 8, 8, 32), (16, 32))
  assert candidates.kernel_extents(_kernel(convolution=False)) == ((1, 8, 8, 32), None)
  kernel = _kernel()
  kernel.computations[0].instructions[-1].convolution_dimension_numbers.kernel_output_feature_dimension = 4
  assert candidates.kernel_extents(kernel) == ((1, 8, 8, 32), None)  # no such kernel dim
  kernel = _kernel()
  kernel.computations[0].instructions[-1].convolution_dimension_numbers.kernel_input_feature_dimension = 0
  assert candidates.kernel_extents(kernel)[1] == (3, 32)
  kernel.computations[0].instructions[-1].convolution_dimension_numbers.kernel_input_feature_dimension = -1
  assert candidates.kernel_extents(kernel)[1] is None
  kernel = _kernel()
  del kernel.computations[0].instructions[-1].shape.dimensions[-1]  # a convolution of another rank than the result
  assert candidates.kernel_extents(kernel)[1] is None
  kernel = _kernel()
  del kernel.computations[0].instructions[-1].operand_ids[1:]  # no kernel operand
  assert candidates.kernel_extents(kernel)[1] is None


def test_kernel_candidates_are_its_tile_sizes_drawn_down_to_the_count_asked():
  every = candidates.kernel_candidates(_kernel(), 5000)
  # 1 * 4 * 4 * 5 output tiles, 4 * 4 feature tiles.
  assert every.num_configs == 1280 and (every.graph_id, every.collection, every.split) == ("fusion.7", "tile:xla", "test")
  expected = [features.tile_config_features(tuning_pb2.TileSizeConfig(output_bounds=output, kernel_bounds=tile))
              for output, tile in candidates.tile_candidates((1, 8, 8, 32), (16, 32), splitmix64.SplitMix64(0))]
  np.testing.assert_array_equal(every.config_feat, expected)
  assert not every.config_runtime.any() and (every.config_runtime_normalizers == 1).all()
  drawn = candidates.kernel_candidates(_kernel(), 100, seed=6, collection="tile:other")
  assert drawn.num_configs == 100 and drawn.collection == "tile:other"
  rng = splitmix64.SplitMix64(6)
  pairs = candidates.tile_candidates((1, 8, 8, 32), (16, 32), rng)
  picked = candidates.sampled_indices(len(pairs), 100, rng)
  np.testing.assert_array_equal(drawn.config_feat, every.config_feat[picked])
  assert candidates.kernel_candidates(_kernel(), 1280).num_configs == 1280
  assert candidates.kernel_candidates(_kernel(), 1).num_configs == 1
  default_seed = candidates.kernel_candidates(_kernel(), 100).config_feat
  np.testing.assert_array_equal(default_seed, candidates.kernel_candidates(_kernel(), 100, seed=0).config_feat)
  assert not np.array_equal(default_seed, candidates.kernel_candidates(_kernel(), 100, seed=1).config_feat)
  for count in (0, -2):
    with pytest.raises(ValueError, match=f"num_candidates must be positive, got {count}"):
      candidates.kernel_candidates(_kernel(), count)
  with pytest.raises(work_limits.WorkLimitError):
    candidates.kernel_candidates(_kernel(), 100, limits=work_limits.WorkLimits(
        max_config_bytes=100 * graphs.TILE_CONFIG_FEATURE_WIDTH * 4 - 1))


# ---- Candidates of a proto.

def test_candidate_graphs_of_a_module_a_tuning_data_and_a_module_tuning_data(tmp_path):
  [program] = candidates.candidate_graphs(_program(), 100, seed=1)
  np.testing.assert_array_equal(program.node_config_feat, candidates.program_candidates(_program(), 100).node_config_feat)
  [entry_free] = candidates.candidate_graphs(_program(), 100, change_entry_layouts=True)
  assert entry_free.num_configs == 32
  tuned = tuning_pb2.ModuleTuningData(module=_program(), config_index_to_node=[4])
  [graph] = candidates.candidate_graphs(tuned, 100)
  np.testing.assert_array_equal(graph.node_config_ids, [4])
  with pytest.raises(graphs.GraphFileError, match=r"t.pb: holds kernels' tuning data"):
    candidates.candidate_graphs(tuning_pb2.TuningData(), 10, source="t.pb")
  tuning = tuning_pb2.TuningData()
  tuning.modules.add().module.CopyFrom(_kernel())
  [kernel] = candidates.candidate_graphs(tuning, 10, kernels=True, seed=2)
  np.testing.assert_array_equal(kernel.config_feat, candidates.kernel_candidates(_kernel(), 10, seed=2).config_feat)
  [fusion] = candidates.candidate_graphs(_kernel(), 10, kernels=True, seed=2)  # an optimized module's fusions
  np.testing.assert_array_equal(fusion.config_feat, kernel.config_feat)
  path = tmp_path / "kernels.pb"
  path.write_bytes(tuning.SerializeToString())
  [from_file] = candidates.candidate_graphs_from_file(path, 10, kernels=True, seed=2)
  np.testing.assert_array_equal(from_file.config_feat, kernel.config_feat)
  path = tmp_path / "program.pb"
  path.write_bytes(_program().SerializeToString())
  [from_file] = candidates.candidate_graphs_from_file(path, 100, change_entry_layouts=True)
  assert from_file.num_configs == 32
  assert candidates.candidate_graphs_from_file(path, 100)[0].num_configs == 8
  np.testing.assert_array_equal(candidates.candidate_graphs_from_file(path, 5)[0].node_config_feat,
                                candidates.program_candidates(_program(), 5, seed=0).node_config_feat)
  np.testing.assert_array_equal(candidates.candidate_graphs(_program(), 5)[0].node_config_feat,
                                candidates.program_candidates(_program(), 5, seed=0).node_config_feat)
  with pytest.raises(work_limits.WorkLimitError):
    candidates.candidate_graphs_from_file(path, 11, limits=work_limits.WorkLimits(max_candidates=10))
  with pytest.raises(work_limits.WorkLimitError, match="program.pb: holds more than 10 bytes"):
    candidates.candidate_graphs_from_file(path, 10, limits=work_limits.WorkLimits(max_module_bytes=10))
  with pytest.raises(work_limits.WorkLimitError):
    candidates.candidate_graphs(_program(), 11, limits=work_limits.WorkLimits(max_candidates=10))


def test_errors_name_the_kernel_and_where_it_came_from():
  tuning = tuning_pb2.TuningData()
  tuning.modules.add().module.CopyFrom(_kernel())
  small = work_limits.WorkLimits(max_config_bytes=4)
  with pytest.raises(work_limits.WorkLimitError, match=r"^HLO kernel module 'fusion.7': 2 candidates"):
    candidates.candidate_graphs(tuning, 2, kernels=True, limits=small)
  with pytest.raises(work_limits.WorkLimitError, match=r"^t.pb \(module 'fusion.7'\): 2 candidates"):
    candidates.candidate_graphs(tuning, 2, kernels=True, limits=small, source="t.pb")
  # An optimized module's kernels are named after their fusion instructions.
  with pytest.raises(work_limits.WorkLimitError, match=r"^HLO kernel module 'fusion': 2 candidates"):
    candidates.candidate_graphs(_kernel(), 2, kernels=True, limits=small)
  with pytest.raises(work_limits.WorkLimitError, match=r"^o.pb \(fusion 'fusion'\): 2 candidates"):
    candidates.candidate_graphs(_kernel(), 2, kernels=True, limits=small, source="o.pb")


def _choice_orders(choices) -> list:
  """The configured dims of _program's dot result, reshape result and reshape operand for one
  row of choices (the entry parameters' fixed layouts take a choice of one)."""
  dot, _, _, reshaped, operand = choices
  return [[[[2, 1], [1, 2]][dot], [2, 1], [1, 0]], [[[1, 0], [0, 1]][reshaped], [[2, 1], [1, 2]][operand], [-1, -1]]]


def test_each_tensor_with_a_layout_takes_one_draw_in_node_and_tensor_order():
  drawn = _tensor_orders(candidates.program_candidates(_program(), 5, seed=9))
  rows = candidates.sampled_layout_choices(np.array([2, 1, 1, 2, 2]), 5, splitmix64.SplitMix64(9))
  np.testing.assert_array_equal(drawn, [_choice_orders(row) for row in rows])
  module = _program()  # a scalar p0 has no layout: no draw
  del module.computations[0].instructions[0].shape.dimensions[:]
  module.computations[0].instructions[2].dot_dimension_numbers.lhs_contracting_dimensions[:] = []
  drawn = _tensor_orders(candidates.program_candidates(module, 5, seed=9))
  rows = candidates.sampled_layout_choices(np.array([2, 1, 2, 2]), 5, splitmix64.SplitMix64(9))
  expected = np.array([_choice_orders([row[0], 0, *row[1:]]) for row in rows])
  expected[:, 0, 1] = -1
  np.testing.assert_array_equal(drawn, expected)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
