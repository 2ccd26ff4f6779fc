"""Layout-search statistics: layouts per configurable node, modal fraction, search groups, runtime
spread, ops off their modal layout, largest single-op effect, additive effects, element orders."""

import sys

import numpy as np
import pytest

import layout_test_data
import sample_data
from tpu_graphs.data import graphs
from tpu_graphs.analysis import layout_search
from tpu_graphs.data import npz
from tpu_graphs.hlo import features
from tpu_graphs.hlo import opcodes


def _rows(*layouts):
  """(c, 1, 18) features of one node whose result tensor takes the given minor-to-major orders."""
  feat = np.full((len(layouts), 1, graphs.LAYOUT_CONFIG_FEATURE_WIDTH), -1.0, np.float32)
  for i, layout in enumerate(layouts):
    feat[i, 0, :len(layout)] = layout
  return feat


def test_each_distinct_row_of_a_node_is_one_category():
  two_nodes = np.concatenate([_rows((1, 0), (0, 1), (1, 0), (1, 0)), _rows((2, 1, 0), (2, 1, 0), (2, 1, 0), (1, 2, 0))],
                             axis=1)
  categories, counts = layout_search.node_layout_categories(two_nodes)
  assert counts.tolist() == [2, 2]
  assert (categories[:, 0] == categories[0, 0]).tolist() == [True, False, True, True]
  assert (categories[:, 1] == categories[0, 1]).tolist() == [True, True, True, False]


def test_categories_rank_each_nodes_distinct_rows_in_sorted_order_however_many_nodes_sort_at_once(monkeypatch):
  rng = np.random.default_rng(3)
  feat = rng.integers(-1, 3, size=(40, 7, graphs.LAYOUT_CONFIG_FEATURE_WIDTH)).astype(np.float32)
  feat[:, 2] = feat[0, 2]  # a node that one layout holds in every config
  feat[:, 5] = feat[:, 6] = feat[0, 5]  # and two neighbours that hold the same one: two categories, not one
  feat[:, 4, 9:] = rng.integers(-1, 3, size=(40, 9))  # rows that differ only in the second key word
  keys = layout_search.node_layout_keys(feat)
  expected = [np.unique(keys[:, node], axis=0, return_inverse=True) for node in range(7)]
  for rows_per_sort in (1, 100, 1 << 22):  # one node per sort (a node's configs exceed it), two, all
    monkeypatch.setattr(layout_search, "_ROWS_PER_SORT", rows_per_sort)
    categories, counts = layout_search.node_layout_categories(feat)
    assert counts.tolist() == [len(distinct) for distinct, _ in expected]
    assert all((categories[:, node] == inverse.reshape(-1)).all() for node, (_, inverse) in enumerate(expected))
  assert counts[[2, 5, 6]].tolist() == [1, 1, 1]


def test_rows_differing_only_in_an_unset_dim_are_different_layouts():
  _, counts = layout_search.node_layout_categories(_rows((1, 0), (1,), (1, 0, 2)))
  assert counts.tolist() == [3]


def test_streamed_features_give_the_same_categories(tmp_path):
  rng = np.random.default_rng(0)
  feat = rng.integers(-1, 4, size=(2500, 3, graphs.LAYOUT_CONFIG_FEATURE_WIDTH)).astype(np.float32)
  path = tmp_path / "npz" / "layout" / "xla" / "random" / "train" / "g.npz"
  npz.write_graph(path, layout_test_data.layout_graph(feat, np.arange(1, 2501)))
  streamed = npz.read_graph(path, stream_configs=True).node_config_feat
  assert hasattr(streamed, "iter_chunks")
  in_memory = layout_search.node_layout_categories(feat)
  from_disk = layout_search.node_layout_categories(streamed)
  assert all((a == b).all() for a, b in zip(in_memory, from_disk))


def test_ops_off_their_modal_layout_are_counted_per_config():
  nodes = np.concatenate([_rows((1, 0), (1, 0), (0, 1), (1, 0), (0, 1)),
                          _rows((2, 1, 0), (2, 1, 0), (2, 1, 0), (2, 1, 0), (1, 2, 0))], axis=1)
  categories, _ = layout_search.node_layout_categories(nodes)
  assert layout_search.off_modal(categories).sum(axis=1).tolist() == [0, 0, 1, 0, 2]


def test_values_that_are_no_layout_dim_are_rejected():
  with pytest.raises(ValueError, match="dims in"):
    layout_search.node_layout_keys(_rows((64, 0)))


def test_file_statistics_are_means_over_nodes_and_the_runtime_spread():
  two_nodes = np.concatenate([_rows((1, 0), (1, 0), (1, 0), (0, 1)), _rows((1, 0), (0, 1), (1, 0), (0, 1))], axis=1)
  found = layout_search.layout_search_statistics(layout_test_data.layout_graph(two_nodes, [10, 20, 30, 25]))
  assert found.distinct_layouts == 2.0
  assert found.modal_fraction == pytest.approx((0.75 + 0.5) / 2)
  assert found.runtime_spread == pytest.approx(3.0)


def test_nodes_that_take_the_same_numbered_layout_in_every_config_are_one_search_group():
  lockstep = np.concatenate([_rows((1, 0), (0, 1), (0, 1)), _rows((2, 1, 0), (1, 2, 0), (1, 2, 0))], axis=1)
  apart = _rows((1, 0), (1, 0), (0, 1))
  categories, _ = layout_search.node_layout_categories(np.concatenate([lockstep, apart], axis=1))
  assert layout_search.search_groups(categories) == 2
  found = layout_search.layout_search_statistics(layout_test_data.layout_graph(np.concatenate([lockstep, apart], axis=1),
                                                                               [10, 20, 30]))
  assert found.ops_per_search_group == 1.5


def test_unlabelled_files_have_no_runtime_spread():
  found = layout_search.layout_search_statistics(layout_test_data.layout_graph(_rows((1, 0), (0, 1)), [0, 0]))
  assert found.runtime_spread is None and found.largest_op_effect is None and found.distinct_layouts == 2.0


def test_the_largest_op_effect_compares_geometric_means_of_well_sampled_layouts():
  many = layout_search.MIN_CONFIGS_PER_LAYOUT
  # Node 0: layouts a / b, geometric means 10 and 40 (4x); node 1: its second layout is taken
  # by too few configs to count.
  node0 = np.repeat([0, 1], [2 * many, 2 * many])
  runtimes = np.where(node0 == 0, np.tile([5.0, 20.0], 2 * many), np.tile([20.0, 80.0], 2 * many))
  node1 = np.zeros(4 * many, np.int64)
  node1[:many - 1] = 1
  categories = np.stack([node0, node1], axis=1)
  assert layout_search.largest_op_effect(categories, runtimes) == pytest.approx(4.0)
  assert layout_search.largest_op_effect(categories[:, 1:], runtimes) == 1.0
  assert layout_search.op_effects(categories, runtimes) == pytest.approx([np.log(4.0), 0.0])


def test_the_additive_fit_separates_an_op_from_the_slow_layout_that_comes_with_it():
  rng = np.random.default_rng(0)
  count = 4000
  # Node 0 makes a config 3x slower in its layout 1; node 1 does nothing, but its layout 1 comes
  # with node 0's slow layout three times as often as its layout 0 does; nodes 2 and 3 move in
  # lockstep, together 2% slower in their layout 1.
  slow = rng.random(count) < 0.2
  node1 = (rng.random(count) < np.where(slow, 0.75, 0.25)).astype(np.int64)
  pair = rng.integers(0, 2, count)
  categories = np.stack([slow.astype(np.int64), node1, pair, pair], axis=1)
  runtimes = 100.0 * np.where(slow, 3.0, 1.0) * np.where(pair == 1, 1.02, 1.0)
  fit = layout_search.additive_effects(categories, runtimes)
  assert fit.group_of.tolist() == [0, 1, 2, 2]
  assert fit.effects == pytest.approx([3.0, 1.0, 1.02], rel=1e-9)
  assert fit.residual == pytest.approx(0.0, abs=1e-9)
  # Comparing node 1's layouts over all configs credits it with much of node 0's effect.
  assert np.exp(layout_search.op_effects(categories, runtimes)[1]) > 1.3
  # Noise shows in the residual, not in the effects.
  noisy = runtimes * np.exp(0.001 * rng.standard_normal(count))
  fit = layout_search.additive_effects(categories, noisy)
  assert fit.residual == pytest.approx(0.001, rel=0.05)
  assert fit.effects == pytest.approx([3.0, 1.0, 1.02], rel=2e-4)


def test_order_agreement_says_which_groups_a_ranking_orders_as_measured():
  rng = np.random.default_rng(1)
  count = 3000
  # Group 0 (node 0) slows a config 2x in its layout 1, group 1 (node 1) 1% in its layout 0; node
  # 2's layouts change nothing.
  categories = rng.integers(0, 2, size=(count, 3))
  runtimes = np.where(categories[:, 0] == 1, 2.0, 1.0) * np.where(categories[:, 1] == 0, 1.01, 1.0)
  assert layout_search.additive_effects(categories, runtimes).effects == pytest.approx([2.0, 1.01, 1.0])
  # The measured order itself agrees everywhere, and spends (but for ties broken in input order)
  # nothing on node 2.
  exact = layout_search.order_agreement(categories, runtimes, runtimes)
  assert exact.by_group == {0: 1.0, 1: 1.0}
  assert exact.unmeasured_share < 1e-3
  # A ranker with group 0 right, group 1 reversed and an effect of node 2's own.
  scores = np.log(runtimes) - 0.02 * (categories[:, 1] == 0) + 0.5 * categories[:, 2]
  found = layout_search.order_agreement(categories, runtimes, scores)
  assert found.by_group == {0: 1.0, 1: -1.0}
  assert 0.1 < found.unmeasured_share < 0.5


def test_real_runtimes_are_a_sum_of_per_group_layout_costs():
  # In unet3d the sum of one term per search group's layout leaves less than 0.01% of log runtime
  # unexplained. The 1x1x1 weight gradient (node 1605) seems to move it by 7.9% only because its
  # rarer layouts come with more of the configs the dominant convolution (node 1022) slows 3x.
  graph = npz.read_graph(sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz"))
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  fit = layout_search.additive_effects(categories, graph.runtimes())
  assert fit.residual < 1e-4
  column = {node: list(graph.node_config_ids).index(node) for node in (1022, 1605)}
  marginal = np.exp(layout_search.op_effects(categories, graph.runtimes()))
  assert fit.effects[fit.group_of[column[1022]]] == pytest.approx(3.05, abs=0.01)
  assert marginal[column[1605]] > 1.07 and fit.effects[fit.group_of[column[1605]]] < 1.002


def test_real_default_search_keeps_nodes_at_their_modal_layout_about_two_thirds_of_the_time():
  path = sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz")
  found = layout_search.layout_search_statistics(npz.read_graph(path, stream_configs=True))
  assert found.distinct_layouts == pytest.approx(5.18, abs=0.01)
  assert found.modal_fraction == pytest.approx(0.659, abs=0.001)
  assert found.runtime_spread == pytest.approx(3.05, abs=0.01)
  # Its search moves 56 configurable ops in 7 groups of alike ops.
  assert found.ops_per_search_group == 8.0
  # One convolution's layouts move unet3d's runtime 3x (issue #26).
  assert found.largest_op_effect == pytest.approx(3.03, abs=0.01)


def test_dimensions_tile_narrow_aligned_or_ragged():
  assert [layout_search.tiling_class(size) for size in (1, 4, 8, 64, 128, 192, 256, 768)] == [
      "narrow", "narrow", "aligned", "aligned", "aligned", "ragged", "aligned", "aligned"]


@pytest.mark.parametrize("name", ["xla/default/train/unet3d.npz", "xla/default/valid/unet_3d.4x4.bf16.npz"])
def test_the_alike_op_rule_groups_real_weight_gradients_as_the_real_search_did(name):
  # The convolutions whose result layouts vary (weight gradients): 15 of 32 to 768 features move
  # together; the first (1 or 4 input features), the 192-into-64 one and the 1x1x1 one (3 or 4
  # outputs) are searched alone, as their results tile otherwise.
  graph = npz.read_graph(sample_data.require_sample(f"npz/layout/{name}"))
  nodes = graph.node_config_ids
  rule = layout_search.alike_op_groups(graph.node_config_feat, graph.node_opcode[nodes],
                                       graph.node_feat[nodes][:, features.SHAPE_COLUMNS])
  categories, _ = layout_search.node_layout_categories(graph.node_config_feat)
  found = np.unique(categories.T, axis=0, return_inverse=True)[1].reshape(-1)
  results = np.rint(graph.node_config_feat[:, :, :features.LAYOUT_MAX_DIMS]).astype(np.int64)
  convolution = graph.node_opcode[nodes] == opcodes.OPCODE_IDS["convolution"]
  varying = convolution & np.asarray([len(np.unique(results[:, j], axis=0)) > 1 for j in range(len(nodes))])
  assert varying.sum() == 18
  same = lambda groups: np.equal.outer(groups[varying], groups[varying])
  assert (same(rule) == same(found)).all()
  assert sorted(np.bincount(found[varying])[np.unique(found[varying])]) == [1, 1, 1, 15]


def test_layouts_that_only_move_size_one_dimensions_share_an_element_order():
  # unet3d's weight gradient f32[3,3,3,1,32] of lhs [2,128,128,128,1] and rhs [2,128,128,128,32].
  shapes = np.array([[3, 3, 3, 1, 32, 0], [2, 128, 128, 128, 1, 0], [2, 128, 128, 128, 32, 0]])
  unset = [-1] * 4
  row = lambda result, lhs, rhs: [*result, *unset, *lhs, *unset, *rhs, *unset]
  rows = np.array([row((3, 4), (0, 4), (0, 4)), row((4, 3), (4, 0), (0, 4)), row((3, 4), (4, 0), (0, 4)),
                   row((4, 3), (0, 4), (4, 0)), row((4, 2), (0, 4), (0, 4))])
  orders = layout_search.element_orders(rows, shapes)
  # Result (3, 4) and (4, 3) both put the 32 features first, lhs (0, 4) and (4, 0) the batch;
  # the rhs's 32 features and batch do change places, and so does a result with dim 2 second.
  assert orders[0] == orders[1] == orders[2]
  assert len({orders[0], orders[3], orders[4]}) == 3
  # Against the real file: every config of the op's four (result, lhs) pairs, whose runtimes differ
  # 3x, falls into one of its two rhs element orders.
  graph = npz.read_graph(sample_data.require_sample("npz/layout/xla/default/train/unet3d.npz"))
  column = list(graph.node_config_ids).index(1022)
  assert np.unique(layout_search.element_orders(graph.node_config_feat[:, column, :], shapes)).size == 2


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
