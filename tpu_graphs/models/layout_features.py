"""What a layout configuration means for cost, as TF ops over layout GraphTensors.

A layout is a minor-to-major order of a tensor's dimensions (TpuGraphs: `node_config_feat`
holds, per configurable op, the orders of its output and up to two inputs, 6 values each, -1 =
unset; `node_feat` holds the op's own default order in its `layout_minor_to_major_*` columns).
The values are dimension indices, not magnitudes, so models read them as categories. Beyond the
categories, four things decide what a layout costs on a TPU, and they are computed here:

* copies: an op whose chosen output layout differs from the layout its consumer asks for (or
  whose inputs disagree with its output) forces XLA to insert a transposing copy;
* the minor-most dimension: TPU vector registers and memory tiles run along it, so its size
  (and the second-minor one's) sets how well a tile is filled;
* padding waste of (8, 128) tiling: the two minor-most dimensions are padded to multiples of 8
  and 128, so a layout that puts a small dimension minor-most multiplies the bytes moved;
* the matrix unit's roles: a convolution writes its result's minor-most dimension across the
  matrix unit's lanes, and whether that is its output-feature dimension, and whether its input
  arrives with the contracting (input-feature) dimension minor-most, decide together how well the
  lanes fill (one such op decides most of the real unet3d's runtime spread). Dimension indices
  differ between a forward and a weight-gradient convolution, so these are compared with the op's
  own convolution dimension numbers, not read as categories. A convolution's result tiles are the
  matrix unit's business, so its rows carry lanes instead of sizes and padding: read as padding,
  a size-1 dimension minor-most would look slow however the input arrives, which is what a model
  trained on generated programs then believed of real unet3d's fastest configs.

All functions take plain tensors and broadcast over leading axes; layouts are (..., 6) int32.
"""

from __future__ import annotations

import tensorflow as tf

from tpu_graphs.hlo import features

MAX_DIMS = features.LAYOUT_MAX_DIMS
TENSORS = features.LAYOUT_MAX_TENSORS  # output, input 0, input 1
# Categories of one layout value: unset (-1) and dimension indices 0..5.
LAYOUT_CATEGORIES = MAX_DIMS + 1
DEFAULT_LAYOUT_COLUMNS = slice(features.NODE_FEATURE_NAMES.index("layout_minor_to_major_0"),
                               features.NODE_FEATURE_NAMES.index("layout_minor_to_major_5") + 1)
# TPU memory tiles: the minor-most dimension is padded to 128 lanes, the second-minor to 8 sublanes.
TILE_LANES, TILE_SUBLANES = 128, 8
OUTPUT_FEATURE_COLUMN = features.NODE_FEATURE_NAMES.index("convolution_dim_numbers_output_feature_dim")
INPUT_FEATURE_COLUMN = features.NODE_FEATURE_NAMES.index("convolution_dim_numbers_input_feature_dim")
# Derived per-config features of a configurable op, see `config_cost_features`.
NUM_COST_FEATURES = 11


def layout_categories(values: tf.Tensor) -> tf.Tensor:
  """(..., w) int32 categories in [0, LAYOUT_CATEGORIES) of layout values (-1 = unset -> 0)."""
  return tf.cast(tf.clip_by_value(tf.round(values), -1, MAX_DIMS - 1), tf.int32) + 1


def default_layouts(node_feat: tf.Tensor) -> tf.Tensor:
  """(n, 6) int32 default minor-to-major order of each op's output, -1 past the op's rank.

  The release pads both the shape and the layout columns with zeros, so the rank is the number
  of leading non-zero dimensions.
  """
  shape = node_feat[:, features.SHAPE_COLUMNS]
  rank = tf.reduce_sum(tf.cast(tf.math.cumprod(tf.cast(shape > 0, tf.int32), axis=1) > 0, tf.int32), axis=1)
  layout = tf.cast(tf.round(node_feat[:, DEFAULT_LAYOUT_COLUMNS]), tf.int32)
  return tf.where(tf.range(MAX_DIMS)[tf.newaxis, :] < rank[:, tf.newaxis], layout, -1)


def layouts_comparable(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """(...) bool: both layouts set at some common position."""
  return tf.reduce_any((a >= 0) & (b >= 0), axis=-1)


def same_layout(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """(...) bool: comparable and equal wherever both are set."""
  both = (a >= 0) & (b >= 0)
  return tf.reduce_any(both, axis=-1) & tf.reduce_all(tf.where(both, tf.equal(a, b), True), axis=-1)


def layout_change(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
  """(...) float32 1 where two comparable layouts differ (a transposing copy), else 0."""
  return tf.cast(layouts_comparable(a, b) & ~same_layout(a, b), tf.float32)


def minor_dimension_sizes(shape: tf.Tensor, layout: tf.Tensor) -> tf.Tensor:
  """(..., 2) float32 sizes of the minor-most and second-minor dimension under `layout`.

  Args:
    shape: (..., 6) dimension sizes of the tensor (zero padded).
    layout: (..., 6) int32 minor-to-major order; an unset position counts as size 1.
  """
  picked = tf.gather(shape, tf.clip_by_value(layout[..., :2], 0, MAX_DIMS - 1), batch_dims=layout.shape.rank - 1)
  return tf.where(layout[..., :2] >= 0, tf.maximum(picked, 1.0), 1.0)


def tiling_padding_waste(minor_sizes: tf.Tensor) -> tf.Tensor:
  """(...) float32 log of padded over real elements when (8, 128) tiles cover the two minor-most
  dimensions: 0 for a 128-multiple minor and 8-multiple second-minor dimension.

  Args:
    minor_sizes: (..., 2) minor-most and second-minor sizes (`minor_dimension_sizes`).
  """
  tile = tf.constant([TILE_LANES, TILE_SUBLANES], minor_sizes.dtype)
  padded = tf.math.ceil(minor_sizes / tile) * tile
  return tf.reduce_sum(tf.math.log(padded / minor_sizes), axis=-1)


def matrix_feature_dims(node_feat: tf.Tensor, is_convolution: tf.Tensor) -> tf.Tensor:
  """(n, 2) int32 (output-feature, input-feature) dimension of each convolution, -1 for other ops.

  Args:
    node_feat: (n, 140) op features (their convolution_dim_numbers columns).
    is_convolution: (n,) bool.
  """
  dims = tf.cast(tf.round(tf.gather(node_feat, [OUTPUT_FEATURE_COLUMN, INPUT_FEATURE_COLUMN], axis=-1)), tf.int32)
  return tf.where(is_convolution[:, tf.newaxis], dims, -1)


def config_cost_features(config_values: tf.Tensor, shape: tf.Tensor, default_layout: tf.Tensor,
                         matrix_dims: tf.Tensor) -> tf.Tensor:
  """(..., NUM_COST_FEATURES) float32 cost features of configurable ops under their configs.

  Columns: output layout differs from input 0's, from input 1's, from the op's default; log size
  of the minor-most and second-minor output dimension and their (8, 128) padding waste (0 for
  convolutions, whose result tiles the matrix unit writes itself); whether the output layout is
  set at all; for convolutions, whether the output's minor-most dimension is its output features,
  whether input 0's is its input features, whether both together force the matrix unit's lanes
  onto another output dimension, and the log share of the 128 lanes the result fills (the output
  features', the forced dimension's, or else the better of the two); 0 for other ops.

  Args:
    config_values: (..., 18) node_config_feat rows (output, input 0, input 1 orders; -1 unset).
    shape: (..., 6) the op's output dimension sizes, broadcastable to the rows.
    default_layout: (..., 6) int32 the op's default output layout (`default_layouts`).
    matrix_dims: (..., 2) int32 the op's `matrix_feature_dims`, broadcastable to the rows.
  """
  values = tf.cast(tf.round(config_values), tf.int32)
  output, input0, input1 = (values[..., i * MAX_DIMS:(i + 1) * MAX_DIMS] for i in range(TENSORS))
  shape = tf.broadcast_to(shape, tf.shape(output))
  sizes = minor_dimension_sizes(shape, output)
  matrix_dims = tf.broadcast_to(matrix_dims, tf.shape(output[..., :2]))
  is_convolution = tf.cast(matrix_dims[..., :1] >= 0, tf.float32)
  minor_is = lambda layout, dim: tf.cast((dim >= 0) & tf.equal(layout[..., 0], dim), tf.float32)[..., tf.newaxis]
  output_features_minor = minor_is(output, matrix_dims[..., 0])
  input_streams = minor_is(input0, matrix_dims[..., 1])
  # The input streams in with its contracting dimension minor-most while the output's minor-most
  # dimension is not its features: the matrix unit's lanes must take the output's minor dimension.
  lanes_forced = input_streams * (1.0 - output_features_minor) * is_convolution
  lanes = lambda size: size / (tf.math.ceil(size / TILE_LANES) * TILE_LANES)
  feature_size = tf.maximum(tf.gather(shape, tf.maximum(matrix_dims[..., :1], 0), batch_dims=shape.shape.rank - 1), 1.0)
  # A convolution's lanes: its output features', or when forced its minor dimension's, or else
  # the better of the two; its result's tile padding is the matrix unit's business, not a cost.
  utilisation = tf.where(output_features_minor > 0, lanes(feature_size),
                         tf.where(lanes_forced > 0, lanes(sizes[..., :1]), tf.maximum(lanes(sizes[..., :1]), lanes(feature_size))))
  padding = (1.0 - is_convolution) * tiling_padding_waste(sizes)[..., tf.newaxis]
  return tf.concat([
      layout_change(output, input0)[..., tf.newaxis], layout_change(output, input1)[..., tf.newaxis],
      layout_change(output, tf.broadcast_to(default_layout, tf.shape(output)))[..., tf.newaxis],
      (1.0 - is_convolution) * tf.math.log(sizes), padding,
      tf.cast(output[..., :1] >= 0, tf.float32),
      output_features_minor, input_streams, lanes_forced, is_convolution * tf.math.log(utilisation)], axis=-1)


def edge_copies(producer_layout: tf.Tensor, consumer_config: tf.Tensor) -> tf.Tensor:
  """(...) float32 1 where a producer's output layout matches none of the input layouts its
  consumer's config asks for (so XLA copies between them), 0 where it matches one or the consumer
  asks for none.

  Args:
    producer_layout: (..., 6) int32 the producer's output layout in that config.
    consumer_config: (..., 18) int32 the consumer's config values (its input orders at 6..17).
  """
  inputs = [consumer_config[..., i * MAX_DIMS:(i + 1) * MAX_DIMS] for i in range(1, TENSORS)]
  asked = tf.reduce_any(tf.stack([layouts_comparable(producer_layout, i) for i in inputs]), axis=0)
  matched = tf.reduce_any(tf.stack([same_layout(producer_layout, i) for i in inputs]), axis=0)
  return tf.cast(asked & ~matched, tf.float32)
