"""A zoo of real model architectures, built from code without weights and compiled by XLA.

Generated TpuGraphs data starts from real programs: each `Program` is a Keras model (a
`tf.keras.applications` CNN, a U-Net, a volumetric U-Net, a video CNN, a Transformer, a recurrent
net, a ViT, an MLP-Mixer) at one batch size and dtype, traced and lowered by XLA on this machine
to HloModuleProtos: the inference step after XLA's fusion passes (tile kernels) and a training
step before optimization (layout graphs, as the release's layout programs are training steps).
Weights never enter the HLO (variables are parameters), so nothing is downloaded or trained.

Family 'xla' holds the CNNs, the U-Nets and the video CNN, family 'nlp' the sequence models,
mirroring the release's xla / nlp layout collections. Inference inputs are small (32-75 px, 32
tokens), training steps run on larger ones (TRAINING_SCALE); the whole zoo compiles in a few
minutes on two cores.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.hlo import from_tensorflow

_IMAGE_SIZE = 32
_SEQUENCE_LENGTH = 32
_VOCABULARY = 512
_CLASSES = 10
# Training steps run on batches TRAINING_BATCH_SCALE times the program's, of inputs TRAINING_SCALE
# times as long per axis (128 px, 128 tokens): real layout programs are training steps whose
# matrix units dominate their runtime, as they do only once activations outweigh the weights.
# Tracing costs the same at any size. Medical scans and volumes train at SCAN_BATCH_SCALE instead:
# one or two per core, as a scan fills the memory a classifier's batch would.
TRAINING_SCALE = 4
TRAINING_BATCH_SCALE = 8
SCAN_BATCH_SCALE = 2


@dataclasses.dataclass(frozen=True)
class Architecture:
  """A model family member: how to build it and what input it takes (without the batch axis)."""

  name: str
  family: str  # 'xla' (vision) or 'nlp' (sequence)
  build: Callable[[tuple], tf.keras.Model]
  input_shape: tuple
  input_dtype: tf.DType = tf.float32
  training_batch_scale: int = TRAINING_BATCH_SCALE  # training batch per program batch


@dataclasses.dataclass(frozen=True)
class Program:
  """One architecture at one batch size and compute dtype ('f32' or 'bf16')."""

  architecture: Architecture
  batch_size: int
  dtype: str

  @property
  def name(self) -> str:
    """E.g. 'resnet50.b4.bf16': the graph id of its layout files and prefix of its kernels."""
    return f"{self.architecture.name}.b{self.batch_size}.{self.dtype}"


@dataclasses.dataclass(frozen=True)
class CompiledProgram:
  """A program's HLO: `module` the inference step as traced (unoptimized), `optimized` that step
  after XLA's passes (tile kernels), `training` the training step as traced (layout graphs); None
  where not asked for."""

  program: Program
  module: Optional[hlo_pb2.HloModuleProto]
  optimized: Optional[hlo_pb2.HloModuleProto]
  training: Optional[hlo_pb2.HloModuleProto] = None


def _application(constructor: Callable) -> Callable[[tuple], tf.keras.Model]:
  return lambda shape: constructor(weights=None, input_shape=shape, classes=_CLASSES)


def _u_net(spatial_dims: int, widths: tuple, classes: int, name: str) -> Callable[[tuple], tf.keras.Model]:
  """A U-Net over 2-D images or 3-D volumes: per level of `widths` two 3x3(x3) convolutions and a
  max pooling, a bottleneck twice the last width, then transposed-convolution upsampling with skip
  connections, and a 1x1(x1) convolution to `classes` outputs."""
  layers = tf.keras.layers
  convolution, pooling, upsampling = {2: (layers.Conv2D, layers.MaxPooling2D, layers.Conv2DTranspose),
                                      3: (layers.Conv3D, layers.MaxPooling3D, layers.Conv3DTranspose)}[spatial_dims]

  def build(shape: tuple) -> tf.keras.Model:
    inputs = tf.keras.Input(shape)
    skips, x = [], inputs
    for filters in widths:
      x = convolution(filters, 3, padding="same", activation="relu")(x)
      x = convolution(filters, 3, padding="same", activation="relu")(x)
      skips.append(x)
      x = pooling()(x)
    x = convolution(2 * widths[-1], 3, padding="same", activation="relu")(x)
    for filters, skip in zip(reversed(widths), reversed(skips)):
      x = upsampling(filters, 2, strides=2, padding="same")(x)
      x = layers.Concatenate()([x, skip])
      x = convolution(filters, 3, padding="same", activation="relu")(x)
    return tf.keras.Model(inputs, convolution(classes, 1)(x), name=name)
  return build


def _c3d(shape: tuple) -> tf.keras.Model:
  """A C3D-style video classifier: 3x3x3 convolutions over (frames, height, width), pooled space
  first and time later, global pooling and a dense head."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape)
  x = layers.Conv3D(32, 3, padding="same", activation="relu")(inputs)
  x = layers.MaxPooling3D((1, 2, 2))(x)
  for filters in (64, 128, 256):
    x = layers.Conv3D(filters, 3, padding="same", activation="relu")(x)
    x = layers.Conv3D(filters, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling3D()(x)
  outputs = layers.Dense(_CLASSES)(layers.GlobalAveragePooling3D()(x))
  return tf.keras.Model(inputs, outputs, name="c3d")


def _v_net(shape: tuple) -> tf.keras.Model:
  """A V-Net-style volumetric segmenter: residual stages of 3x3x3 convolutions, strided 2x2x2
  convolutions instead of pooling, transposed-convolution upsampling with skip connections."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape)
  x, skips = layers.Conv3D(16, 3, padding="same", activation="relu")(inputs), []
  for filters in (16, 32, 64):
    stage = layers.Conv3D(filters, 3, padding="same", activation="relu")(x)
    x = layers.Add()([x, layers.Conv3D(filters, 3, padding="same")(stage)])
    skips.append(x)
    x = layers.Conv3D(2 * filters, 2, strides=2, activation="relu")(x)
  for filters, skip in zip((64, 32, 16), reversed(skips)):
    x = layers.Conv3DTranspose(filters, 2, strides=2)(x)
    x = layers.Conv3D(filters, 3, padding="same", activation="relu")(layers.Concatenate()([x, skip]))
  return tf.keras.Model(inputs, layers.Conv3D(2, 1)(x), name="vnet")


def _resnet3d(shape: tuple) -> tf.keras.Model:
  """A small 3-D ResNet video classifier: a 3x3x3 stem, residual blocks with strided 1x1x1
  projections between stages, global pooling and a dense head."""
  layers = tf.keras.layers
  inputs = tf.keras.Input(shape)
  x = layers.Conv3D(32, 3, padding="same", activation="relu")(inputs)
  for filters, strides in ((32, 1), (64, 2), (128, 2)):
    shortcut = layers.Conv3D(filters, 1, strides=strides)(x) if strides > 1 else x
    y = layers.Conv3D(filters, 3, strides=strides, padding="same", activation="relu")(x)
    x = layers.ReLU()(layers.Add()([shortcut, layers.Conv3D(filters, 3, padding="same")(y)]))
  outputs = layers.Dense(_CLASSES)(layers.GlobalAveragePooling3D()(x))
  return tf.keras.Model(inputs, outputs, name="resnet3d")


def _transformer_block(x, width: int, heads: int, causal: bool, memory=None):
  layers = tf.keras.layers
  attention = layers.MultiHeadAttention(heads, width // heads)(x, x, use_causal_mask=causal)
  x = layers.LayerNormalization()(x + attention)
  if memory is not None:
    cross = layers.MultiHeadAttention(heads, width // heads)(x, memory)
    x = layers.LayerNormalization()(x + cross)
  hidden = layers.Dense(4 * width, activation="gelu")(x)
  return layers.LayerNormalization()(x + layers.Dense(width)(hidden))


def transformer_encoder(shape: tuple, num_layers: int = 2, width: int = 64, heads: int = 4) -> tf.keras.Model:
  """A BERT-like encoder: token + position embeddings, `num_layers` post-norm blocks, a pooled head."""
  layers = tf.keras.layers
  tokens = tf.keras.Input(shape, dtype=tf.int32)
  x = layers.Embedding(_VOCABULARY, width)(tokens)
  x = x + layers.Embedding(shape[0], width)(tf.range(shape[0]))
  for _ in range(num_layers):
    x = _transformer_block(x, width, heads, causal=False)
  outputs = layers.Dense(_CLASSES)(layers.GlobalAveragePooling1D()(x))
  return tf.keras.Model(tokens, outputs, name=f"transformer_encoder_{num_layers}")


def _transformer_decoder(shape: tuple) -> tf.keras.Model:
  """An encoder-decoder Transformer: a 2-layer encoder, a 2-layer causal decoder with cross attention."""
  layers = tf.keras.layers
  tokens = tf.keras.Input(shape, dtype=tf.int32)
  embedding = layers.Embedding(_VOCABULARY, 64)
  memory = embedding(tokens)
  for _ in range(2):
    memory = _transformer_block(memory, 64, 4, causal=False)
  x = embedding(tokens)
  for _ in range(2):
    x = _transformer_block(x, 64, 4, causal=True, memory=memory)
  return tf.keras.Model(tokens, layers.Dense(_VOCABULARY)(x), name="transformer_decoder")


def _recurrent(cell: Callable) -> Callable[[tuple], tf.keras.Model]:
  def build(shape: tuple) -> tf.keras.Model:
    layers = tf.keras.layers
    tokens = tf.keras.Input(shape, dtype=tf.int32)
    x = layers.Embedding(_VOCABULARY, 64)(tokens)
    x = cell(64, return_sequences=True)(x)
    x = cell(64)(x)
    return tf.keras.Model(tokens, layers.Dense(_CLASSES)(x), name=cell.__name__.lower())
  return build


def _vit(patch: int, name: str) -> Callable[[tuple], tf.keras.Model]:
  """A small Vision Transformer: `patch` x `patch` patches, 3 encoder blocks, mean-pooled head."""
  def build(shape: tuple) -> tf.keras.Model:
    layers = tf.keras.layers
    images = tf.keras.Input(shape)
    patches = layers.Conv2D(64, patch, strides=patch)(images)
    x = layers.Reshape((-1, 64))(patches)
    for _ in range(3):
      x = _transformer_block(x, 64, 4, causal=False)
    return tf.keras.Model(images, layers.Dense(_CLASSES)(layers.GlobalAveragePooling1D()(x)), name=name)
  return build


def _mlp_mixer(shape: tuple) -> tf.keras.Model:
  """An MLP-Mixer: 4x4 patches, 3 blocks of token mixing (on the transposed patches) and channel mixing."""
  layers = tf.keras.layers
  images = tf.keras.Input(shape)
  x = layers.Reshape((-1, 64))(layers.Conv2D(64, 4, strides=4)(images))
  tokens = x.shape[1]
  for _ in range(3):
    mixed = layers.Permute((2, 1))(layers.LayerNormalization()(x))
    mixed = layers.Dense(tokens)(layers.Dense(2 * tokens, activation="gelu")(mixed))
    x = x + layers.Permute((2, 1))(mixed)
    x = x + layers.Dense(64)(layers.Dense(128, activation="gelu")(layers.LayerNormalization()(x)))
  return tf.keras.Model(images, layers.Dense(_CLASSES)(layers.GlobalAveragePooling1D()(x)), name="mlp_mixer")


_APPS = tf.keras.applications
_IMAGE = (_IMAGE_SIZE, _IMAGE_SIZE, 3)
_TOKENS = (_SEQUENCE_LENGTH,)

ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture("resnet50", "xla", _application(_APPS.ResNet50), _IMAGE),
    Architecture("resnet50_v2", "xla", _application(_APPS.ResNet50V2), _IMAGE),
    Architecture("mobilenet", "xla", _application(_APPS.MobileNet), _IMAGE),
    Architecture("mobilenet_v2", "xla", _application(_APPS.MobileNetV2), _IMAGE),
    Architecture("mobilenet_v3_small", "xla", _application(_APPS.MobileNetV3Small), _IMAGE),
    Architecture("efficientnet_b0", "xla", _application(_APPS.EfficientNetB0), _IMAGE),
    Architecture("densenet121", "xla", _application(_APPS.DenseNet121), _IMAGE),
    Architecture("inception_v3", "xla", _application(_APPS.InceptionV3), (75, 75, 3)),
    Architecture("vgg16", "xla", _application(_APPS.VGG16), _IMAGE),
    Architecture("unet", "xla", _u_net(2, (16, 32, 64), _CLASSES, "unet"), _IMAGE),
    # A volumetric U-Net on one-channel volumes (MLPerf's unet3d family).
    Architecture("unet3d_small", "xla", _u_net(3, (32, 64, 128), 3, "unet3d_small"), (16, 16, 16, 1),
                 training_batch_scale=SCAN_BATCH_SCALE),
    Architecture("c3d", "xla", _c3d, (8, 32, 32, 3)),
    # Multi-modal (4-channel) MRI volumes, four levels, as in the BraTS-style unet_3d programs.
    Architecture("unet3d_deep", "xla", _u_net(3, (16, 32, 64, 128), 3, "unet3d_deep"), (16, 16, 16, 4),
                 training_batch_scale=SCAN_BATCH_SCALE),
    Architecture("vnet", "xla", _v_net, (16, 16, 16, 2), training_batch_scale=SCAN_BATCH_SCALE),
    Architecture("resnet3d", "xla", _resnet3d, (8, 16, 16, 3)),
    Architecture("transformer_encoder", "nlp", transformer_encoder, _TOKENS, tf.int32),
    Architecture("transformer_decoder", "nlp", _transformer_decoder, _TOKENS, tf.int32),
    Architecture("lstm", "nlp", _recurrent(tf.keras.layers.LSTM), _TOKENS, tf.int32),
    Architecture("gru", "nlp", _recurrent(tf.keras.layers.GRU), _TOKENS, tf.int32),
    Architecture("vit", "nlp", _vit(4, "vit"), _IMAGE),
    # One-channel medical scans (X-ray, CT slices) in 16x16 patches, trained at small batches: the
    # patch embedding's weight gradient has a size-1 dimension.
    Architecture("vit_grayscale", "nlp", _vit(16, "vit_grayscale"), (_IMAGE_SIZE, _IMAGE_SIZE, 1),
                 training_batch_scale=SCAN_BATCH_SCALE),
    Architecture("mlp_mixer", "nlp", _mlp_mixer, _IMAGE),
)
ARCHITECTURES_BY_NAME = {a.name: a for a in ARCHITECTURES}


def build_model(program: Program, input_shape: Optional[tuple] = None) -> tf.keras.Model:
  """The program's Keras model (for `input_shape`, default the architecture's), with bf16
  compute under Keras' mixed_bfloat16 policy.

  The Keras session is cleared first so layer names (and anything derived from them) do not
  depend on what was built before in the process.
  """
  tf.keras.backend.clear_session()
  policy = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy("mixed_bfloat16" if program.dtype == "bf16" else "float32")
  try:
    return program.architecture.build(input_shape or program.architecture.input_shape)
  finally:
    tf.keras.mixed_precision.set_global_policy(policy)


def training_input_shape(architecture: Architecture) -> tuple:
  """The input shape of the architecture's training step: images and sequences TRAINING_SCALE
  times as long per axis as its inference input (channels kept)."""
  *axes, last = architecture.input_shape
  if architecture.input_dtype.is_integer:  # tokens: (sequence,)
    return tuple(a * TRAINING_SCALE for a in architecture.input_shape)
  return tuple(a * TRAINING_SCALE for a in axes) + (last,)


def compile_model(model: tf.keras.Model, input_spec: tf.TensorSpec, program: Program,
                  optimized: bool = True, traced: bool = True) -> CompiledProgram:
  """Traces `model` on `input_spec` and asks XLA for the unoptimized (if `traced`) and optimized
  (if `optimized`) modules of its inference step. The zoo's models have no Python control flow
  on tensors, so they are traced without autograph: the same modules, in less time."""
  forward = tf.function(lambda inputs: model(inputs, training=False), jit_compile=True, autograph=False)
  return CompiledProgram(
      program=program,
      module=from_tensorflow.hlo_module(forward, input_spec) if traced else None,
      optimized=from_tensorflow.hlo_module(forward, input_spec, optimized=True) if optimized else None)


def _training_step(model: tf.keras.Model) -> Callable:
  """inputs -> the gradients of a loss with respect to every trainable variable.

  The release's layout programs are training steps (unet3d's configurable ops are its forward,
  input-gradient and weight-gradient convolutions), so the generated ones are too. The loss, the
  mean square of the outputs, needs no labels; it has the backward pass any loss has.
  """
  def step(inputs):
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=True)
      loss = tf.reduce_mean(tf.square(tf.cast(outputs, tf.float32)))
    return tape.gradient(loss, model.trainable_variables)
  return step


def compile_program(program: Program, traced_inference: bool = False) -> CompiledProgram:
  """Builds and compiles one program of the zoo: its optimized inference step (and, with
  `traced_inference`, that step as traced: generated files read the optimized step's kernels and
  the training step alone) and its training step on training_batch_scale (TRAINING_BATCH_SCALE by
  default) times the batch of training_input_shape inputs."""
  architecture = program.architecture
  spec = tf.TensorSpec((program.batch_size,) + architecture.input_shape, architecture.input_dtype)
  compiled = compile_model(build_model(program), spec, program, traced=traced_inference)
  shape = training_input_shape(architecture)
  training = from_tensorflow.hlo_module(
      _training_step(build_model(program, shape)),
      tf.TensorSpec((program.batch_size * architecture.training_batch_scale,) + shape, architecture.input_dtype),
      autograph=False)
  return dataclasses.replace(compiled, training=without_dead_code(training))


def without_dead_code(module: hlo_pb2.HloModuleProto) -> hlo_pb2.HloModuleProto:
  """A copy of `module` whose entry computation keeps only its parameters and the instructions
  its root depends on.

  TensorFlow hands XLA the whole traced step, including what the gradients never use (the input
  gradient of the first layer, in resnet50 about 40% of the instructions); the release's programs
  hold only what runs, and a cost model must not charge for the rest.
  """
  pruned = hlo_pb2.HloModuleProto()
  pruned.CopyFrom(module)
  entry = next(c for c in pruned.computations if c.id == pruned.entry_computation_id)
  by_id = {instruction.id: instruction for instruction in entry.instructions}
  live, pending = set(), [entry.root_id]
  while pending:
    current = pending.pop()
    if current not in live:
      live.add(current)
      pending.extend(by_id[current].operand_ids)
      pending.extend(by_id[current].control_predecessor_ids)
  kept = [instruction for instruction in entry.instructions if instruction.id in live or instruction.opcode == "parameter"]
  del entry.instructions[:]
  entry.instructions.extend(kept)
  return pruned
