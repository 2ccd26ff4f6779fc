"""The tile cost model behind generated tile files: on-chip memory, cores, alignment, kernels that
want other tiles, convolution kernel tiles."""

import math
import sys

import pytest

from tpu_graphs.synth import tile_cost_model


def _work(dims=(64, 512), flops=1e8, streamed_input_bytes=4e6, element_bytes=4):
  return tile_cost_model.KernelWork(output_dims=dims, output_minor_to_major=(1, 0), output_element_bytes=element_bytes,
                               flops=flops, streamed_input_bytes=streamed_input_bytes, broadcast_input_bytes=0.0,
                               scratch_bytes_per_element=0.0, uses_mxu=False)


def _best_tile(work):
  sizes = [[2**p for p in range(d.bit_length()) if 2**p <= d] for d in work.output_dims]
  tiles = [(a, b) for a in sizes[0] for b in sizes[1]]
  return min(tiles, key=lambda tile: tile_cost_model.tile_runtime(work, tile))


def test_tiles_that_overflow_on_chip_memory_run_single_buffered_and_spill():
  work = _work(dims=(256, 1024), flops=1e6, streamed_input_bytes=256 * 1024 * 4)
  fits = (8, 1024)  # 2 x (32 KiB output + 32 KiB input) buffers: just double-buffered
  assert 2 * 2 * 8 * 1024 * 4 <= tile_cost_model.VMEM_BYTES
  overflows = (256, 1024)
  assert tile_cost_model.tile_runtime(work, overflows) > 1.5 * tile_cost_model.tile_runtime(work, fits)


def test_one_tile_leaves_a_core_idle():
  work = _work(dims=(16, 1024), flops=1e5, streamed_input_bytes=16 * 1024 * 4)
  assert tile_cost_model.tile_runtime(work, (8, 1024)) < 0.7 * tile_cost_model.tile_runtime(work, (16, 1024))


def test_tiny_and_misaligned_tiles_are_slower_than_aligned_ones():
  work = _work()
  aligned = tile_cost_model.tile_runtime(work, (8, 512))
  assert tile_cost_model.tile_runtime(work, (1, 1)) > 10 * aligned  # per-tile overhead
  assert tile_cost_model.tile_runtime(work, (8, 100)) > aligned  # 100 lanes padded to 128


def test_the_best_tile_depends_on_the_kernel():
  # Same output dims and config space. More operands (a bigger VMEM working set per output
  # element) need smaller tiles; a compute-heavy body gains from a deeper pipeline.
  base = _work(dims=(64, 1024), flops=1e4, streamed_input_bytes=64 * 1024 * 2, element_bytes=2)
  many_operands = _work(dims=(64, 1024), flops=1e4, streamed_input_bytes=6 * 64 * 1024 * 2, element_bytes=2)
  compute_heavy = _work(dims=(64, 1024), flops=64 * 1024 * 40, streamed_input_bytes=64 * 1024 * 2, element_bytes=2)
  assert _best_tile(base) == (32, 1024)  # two tiles, one per core
  assert math.prod(_best_tile(many_operands)) < math.prod(_best_tile(base))
  assert math.prod(_best_tile(compute_heavy)) < math.prod(_best_tile(base))


def test_a_convolution_kernel_tile_sets_reads_and_matrix_unit_use():
  work = tile_cost_model.KernelWork(
      output_dims=(4, 8, 8, 256), output_minor_to_major=(3, 2, 1, 0), output_element_bytes=2, flops=3e8,
      streamed_input_bytes=0.0, broadcast_input_bytes=0.0, scratch_bytes_per_element=0.0, uses_mxu=True,
      activation_bytes=4 * 8 * 8 * 256 * 2, weight_bytes=9 * 256 * 256 * 2, feature_dimension=3,
      convolution_features=(256, 256), convolution_window=9)
  output_tile = (1, 8, 8, 256)
  full = tile_cost_model.tile_runtime(work, output_tile, (128, 128))
  assert tile_cost_model.tile_runtime(work, output_tile, (32, 128)) > 1.3 * full  # MXU a quarter used
  assert tile_cost_model.tile_runtime(work, output_tile, (128, 16)) > full  # activations re-read 16 times


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
