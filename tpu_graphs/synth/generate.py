"""Generated TpuGraphs datasets: the zoo's programs, configs, and cost-model labels, as npz files.

GENERATED DATA, not TPU measurements. The tree mirrors the release:

    <out>/npz/tile/xla/{train,valid,test}/<program>.<kernel>.npz
    <out>/npz/layout/{xla,nlp}/{default,random}/{train,valid,test}/<program>.npz
    <out>/test_labels/<same path as the test file, .npy>   true labels of test files
    <out>/GENERATED.md                                     what this is and how it was made

Test files have runtimes 0 (and tile normalizers 1) as in the public release; their labels are
kept in test_labels/ for local scoring: (c,) int64 runtimes for layout, (c, 2) int64
[runtime, normalizer] for tile.

Determinism: every file draws from its own generator seeded by (seed, GENERATOR_VERSION, file
key), and XLA's HLO (as featurized) is the same from run to run, so the same seed and version
give byte-identical files whatever subset of programs is generated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import pathlib
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.data import npz
from tpu_graphs.data import storage
from tpu_graphs.hlo import candidates, fusion_kernels
from tpu_graphs.hlo import featurize
from tpu_graphs.hlo import features
from tpu_graphs.hlo import tuning_pb2
from tpu_graphs.synth import hardware
from tpu_graphs.synth import layout_configs
from tpu_graphs.synth import layout_cost_model
from tpu_graphs.synth import tile_cost_model
from tpu_graphs.synth import zoo

GENERATOR_VERSION = 4
MAX_CONFIGS = 100_000
CONFIG_CHUNK = 1000
# Splits are by architecture, so valid and test hold models never seen in training.
SPLIT_OF_ARCHITECTURE = {
    "resnet50": "train", "mobilenet_v2": "train", "mobilenet_v3_small": "train", "efficientnet_b0": "train",
    "densenet121": "train", "inception_v3": "train", "mobilenet": "valid", "vgg16": "valid",
    "resnet50_v2": "test", "unet": "test", "unet3d_small": "train", "c3d": "valid",
    "unet3d_deep": "train", "vnet": "train", "resnet3d": "train", "vit_grayscale": "train",
    "transformer_encoder": "train", "transformer_decoder": "train", "vit": "train", "gru": "train",
    "mlp_mixer": "valid", "lstm": "test",
}


@dataclasses.dataclass(frozen=True)
class Scale:
  """How much to generate: program variants (batch size, dtype), configs per graph, kernels."""

  variants: tuple
  layout_configs: int
  tile_configs: int
  kernels_per_program: int


SCALES = {
    "tiny": Scale(variants=((1, "f32"),), layout_configs=16, tile_configs=8, kernels_per_program=3),
    "small": Scale(variants=((1, "f32"), (4, "bf16")), layout_configs=1000, tile_configs=64, kernels_per_program=10),
    "full": Scale(variants=((1, "f32"), (4, "f32"), (1, "bf16"), (8, "bf16")), layout_configs=10_000,
                  tile_configs=500, kernels_per_program=1000),
}
Progress = Callable[[int, int, str], None]


@dataclasses.dataclass(frozen=True)
class GeneratedFile:
  """A written data file and the noiseless cost-model runtimes (c,) float64 seconds of its configs
  (for tile: divided by the default config's noiseless runtime), kept for scoring the model itself."""

  path: pathlib.Path
  noiseless_runtimes: np.ndarray


def file_rng(seed: int, *key: str) -> np.random.Generator:
  """A generator for one file (or chunk), independent of everything else generated."""
  digest = hashlib.sha256("/".join((str(GENERATOR_VERSION),) + key).encode()).digest()
  return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def programs(scale: Scale, architectures: Optional[Sequence[str]] = None) -> list[zoo.Program]:
  names = architectures or [a.name for a in zoo.ARCHITECTURES]
  return [zoo.Program(zoo.ARCHITECTURES_BY_NAME[name], batch, dtype)
          for name in names for batch, dtype in scale.variants]


# --------------------------------------------------------------------------------------------
# Layout collections.


def write_layout_file(root: pathlib.Path, collection: str, split: str, graph_id: str,
                      nodes: featurize.ModuleFeatures, model: layout_cost_model.LayoutCostModel,
                      num_configs: int, seed: int) -> GeneratedFile:
  """Writes one layout graph with `num_configs` configs, streaming node_config_feat in chunks.

  Configs are drawn chunk by chunk from generators keyed by (file, chunk), once to label them and
  once more while writing their features, so memory stays at one chunk of (CONFIG_CHUNK, nc, 18).
  """
  _, source, search = collection.split(":")
  key = (collection, graph_id)
  starts = range(0, num_configs, CONFIG_CHUNK)
  compiler = None
  if search == "default":
    compiler = layout_configs.compiler_layouts(model, file_rng(seed, "compiler", graph_id))

  def chunks() -> Iterator[np.ndarray]:
    for start in starts:
      yield layout_configs.layout_choices(model, search, min(CONFIG_CHUNK, num_configs - start),
                                          file_rng(seed, *key, "configs", str(start)), first=start == 0,
                                          compiler=compiler)

  runtimes = np.concatenate([model.runtimes(choices) for choices in chunks()])
  measured = hardware.measure(runtimes, file_rng(seed, *key, "noise"))
  nc = len(model.configurable_nodes)
  width = features.LAYOUT_MAX_TENSORS * features.LAYOUT_MAX_DIMS
  arrays = dict(
      node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
      node_config_ids=model.configurable_nodes,
      node_config_feat=((num_configs, nc, width), np.float32,
                        lambda: (model.config_features(choices) for choices in chunks())),
      config_runtime=measured if split != "test" else np.zeros_like(measured),
      node_splits=nodes.node_splits)
  path = root / "npz" / "layout" / source / search / split / f"{graph_id}.npz"
  npz.write_npz(path, arrays)
  if split == "test":
    _write_labels(root, path, measured)
  return GeneratedFile(path, runtimes)


def _write_labels(root: pathlib.Path, data_path: pathlib.Path, labels: np.ndarray) -> None:
  relative = data_path.relative_to(root / "npz").with_suffix(".npy")
  path = root / "test_labels" / relative
  path.parent.mkdir(parents=True, exist_ok=True)
  with storage.atomic_path(path) as temporary, open(temporary, "wb") as stream:
    np.save(stream, labels, allow_pickle=False)


def layout_model(compiled_module, graph_id: str, seed: int):
  """Features, cost model and configurable nodes of a program's unoptimized module."""
  nodes = featurize.module_features(compiled_module, f"generated program {graph_id}")
  costed = layout_cost_model.costed_nodes(compiled_module)
  chosen = layout_configs.configurable_nodes(nodes, costed, file_rng(seed, "configurable", graph_id))
  return nodes, layout_cost_model.LayoutCostModel(nodes.instructions, costed, chosen)


# --------------------------------------------------------------------------------------------
# Tile collection.

def write_tile_file(root: pathlib.Path, split: str, graph_id: str, kernel, num_configs: int,
                    seed: int) -> Optional[GeneratedFile]:
  """Writes one kernel's tile graph; None when it has fewer than two tile sizes."""
  key = ("tile:xla", graph_id)
  work = tile_cost_model.kernel_work(kernel)
  tiles = [pair for pair in candidates.tile_candidates(work.output_dims, work.convolution_features,
                                                       file_rng(seed, *key, "candidates"))
           if math.isfinite(tile_cost_model.tile_runtime(work, *pair))]
  if len(tiles) < 2:
    return None
  default = min(range(len(tiles)), key=lambda i: tile_cost_model.tile_footprint_target(work, tiles[i][0]))
  rng = file_rng(seed, *key, "configs")
  others = [i for i in range(len(tiles)) if i != default]
  picked = [default] + [others[i] for i in np.sort(rng.choice(len(others), min(num_configs - 1, len(others)),
                                                              replace=False))]
  config_feat = np.stack([features.tile_config_features(tuning_pb2.TileSizeConfig(
      output_bounds=tiles[i][0], kernel_bounds=tiles[i][1])) for i in picked])
  noise = file_rng(seed, *key, "noise")
  runtimes = np.asarray([tile_cost_model.tile_runtime(work, *tiles[i]) for i in picked])
  measured = hardware.measure(runtimes, noise)
  normalizer = hardware.measure(runtimes[:1], noise)
  normalizers = np.full(len(picked), normalizer[0], np.int64)
  nodes = featurize.module_features(kernel, f"generated kernel {graph_id}")
  labelled = split != "test"
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                config_feat=config_feat, config_runtime=measured if labelled else np.zeros_like(measured),
                config_runtime_normalizers=normalizers if labelled else np.ones_like(normalizers))
  graphs.validate_graph(graph_id, graph_id, "tile:xla", split, arrays)
  path = root / "npz" / "tile" / "xla" / split / f"{graph_id}.npz"
  npz.write_npz(path, arrays)
  if not labelled:
    _write_labels(root, path, np.stack([measured, normalizers], axis=1))
  return GeneratedFile(path, runtimes / runtimes[0])


def with_matrix_fusions(optimized: hlo_pb2.HloModuleProto) -> hlo_pb2.HloModuleProto:
  """A copy of `optimized` in which every convolution and dot outside a fusion is wrapped in one.

  The CPU backend that compiles the zoo leaves convolutions and dots unfused; XLA:TPU runs each
  as a convolution fusion, and those matrix-unit kernels are where tile sizes matter most (output
  tile vs kernel tile, re-reads of activations and weights). The wrapper computation holds one
  parameter per operand and the op as root.
  """
  module = hlo_pb2.HloModuleProto()
  module.CopyFrom(optimized)
  next_id = 1 + max(max(i.id for c in module.computations for i in c.instructions),
                    max(c.id for c in module.computations))
  fused = {cid for c in module.computations for i in c.instructions if i.opcode == "fusion"
           for cid in i.called_computation_ids}
  by_id = {i.id: i for c in module.computations for i in c.instructions}
  for computation in list(module.computations):
    if computation.id in fused or computation.is_fusion_computation:
      continue
    for instruction in computation.instructions:
      if instruction.opcode not in candidates.MXU_OPCODES:
        continue
      body = module.computations.add(name=f"fused_{instruction.name}", id=next_id, is_fusion_computation=True)
      next_id += 1
      for number, operand_id in enumerate(instruction.operand_ids):
        parameter = body.instructions.add(name=f"param_{number}.{next_id}", opcode="parameter", id=next_id,
                                          parameter_number=number)
        parameter.shape.CopyFrom(by_id[operand_id].shape)
        next_id += 1
      root = body.instructions.add()
      root.CopyFrom(instruction)
      root.id = next_id
      del root.operand_ids[:]
      root.operand_ids.extend(i.id for i in body.instructions[:-1])
      body.root_id = root.id
      next_id += 1
      instruction.CopyFrom(hlo_pb2.HloInstructionProto(
          name=instruction.name, id=instruction.id, opcode="fusion", fusion_kind="kOutput", shape=instruction.shape,
          operand_ids=instruction.operand_ids, called_computation_ids=[body.id]))
  return module


def distinct_kernels(optimized) -> list:
  """The program's kernel modules (fusions, and convolutions and dots wrapped as fusions), without
  repeats of an identical kernel graph, in module order."""
  seen, kernels = set(), []
  for kernel in fusion_kernels.kernel_modules(with_matrix_fusions(optimized)):
    nodes = featurize.module_features(kernel)
    digest = hashlib.sha256(nodes.node_feat.tobytes() + nodes.node_opcode.tobytes()
                            + nodes.edge_index.tobytes()).hexdigest()
    if digest not in seen:
      seen.add(digest)
      kernels.append(kernel)
  return kernels


# --------------------------------------------------------------------------------------------


_README = """# GENERATED TpuGraphs-format data (not TPU measurements)

Every file here is in the exact npz format of the TpuGraphs release, but the runtimes come from
an analytical TPU-like cost model (`tpu_graphs/synth/*_cost_model.py`), not from a TPU. The graphs
are real: programs of a model zoo (`tpu_graphs/synth/zoo.py`) compiled by XLA on the generating
machine and featurized by `tpu_graphs/hlo`. Layout files hold each program's training step (on
larger inputs and batches than its name says: `zoo.TRAINING_SCALE` and the architecture's
`training_batch_scale`), tile files the fused kernels of its inference step.

- scale: {scale}; seed: {seed}; generator version: {version}
- programs: {programs}
- regenerate: `python baselines/generate.py --output_dir <dir> --scale {scale} --seed {seed}{architectures}`
- test files have zero runtimes (tile normalizers 1), as in the release; their true labels are
  in `test_labels/` (layout: (c,) int64 runtimes; tile: (c, 2) int64 [runtime, normalizer]).
"""


def generate(output_dir, scale: str = "small", seed: int = 0, architectures: Optional[Sequence[str]] = None,
             configs_per_graph: Optional[int] = None, progress: Optional[Progress] = None) -> list[GeneratedFile]:
  """Generates all five collections from the zoo; returns the written data files.

  Args:
    output_dir: the root of the generated tree (see the module docstring).
    scale: a key of SCALES.
    seed: the generation seed.
    architectures: names from zoo.ARCHITECTURES to generate (default: all).
    configs_per_graph: overrides the scale's layout config count (at most MAX_CONFIGS).
    progress: called as progress(done, total, program name) after each program.
  """
  settings = SCALES[scale]
  layout_configs = min(configs_per_graph or settings.layout_configs, MAX_CONFIGS)
  root = pathlib.Path(output_dir)
  root.mkdir(parents=True, exist_ok=True)
  todo = programs(settings, architectures)
  written = []
  for done, program in enumerate(todo):
    compiled = zoo.compile_program(program)
    family, split = program.architecture.family, SPLIT_OF_ARCHITECTURE[program.architecture.name]
    nodes, model = layout_model(compiled.training, program.name, seed)
    for search in ("default", "random"):
      written.append(write_layout_file(root, f"layout:{family}:{search}", split, program.name, nodes, model,
                                       layout_configs, seed))
    kernels = distinct_kernels(compiled.optimized)
    order = file_rng(seed, "kernels", program.name).permutation(len(kernels))
    kept = 0
    for index in order:
      if kept == settings.kernels_per_program:
        break
      generated = write_tile_file(root, split, f"{program.name}.{int(index):03d}", kernels[index],
                                  settings.tile_configs, seed)
      if generated is not None:
        written.append(generated)
        kept += 1
    if progress:
      progress(done + 1, len(todo), program.name)
  with storage.atomic_path(root / "GENERATED.md") as temporary:
    temporary.write_text(_README.format(
        scale=scale, seed=seed, version=GENERATOR_VERSION, programs=", ".join(p.name for p in todo),
        architectures=f" --architectures {','.join(architectures)}" if architectures else ""))
  return written


def generate_stress(output_dir, seed: int = 0, min_nodes: int = 20_000, num_configs: int = MAX_CONFIGS,
                    layers_per_step: int = 8) -> GeneratedFile:
  """One NLP-sized layout file: a Transformer encoder deep enough for `min_nodes` nodes, with
  `num_configs` random-search configs, written in streaming fashion (train split)."""
  architecture = zoo.ARCHITECTURES_BY_NAME["transformer_encoder"]
  spec_shape = (1,) + architecture.input_shape
  layers = layers_per_step
  while True:
    program = zoo.Program(architecture, 1, "f32")
    zoo.build_model(program)  # clears the Keras session and sets the dtype policy
    model = zoo.transformer_encoder(architecture.input_shape, num_layers=layers)
    compiled = zoo.compile_model(model, tf.TensorSpec(spec_shape, tf.int32), program, optimized=False)
    graph_id = f"transformer_encoder_{layers}.b1.f32"
    nodes, cost = layout_model(compiled.module, graph_id, seed)
    if nodes.num_nodes >= min_nodes:
      break
    layers = math.ceil(layers * min_nodes / nodes.num_nodes) + 1
  return write_layout_file(pathlib.Path(output_dir), "layout:nlp:random", "train", graph_id, nodes, cost,
                           min(num_configs, MAX_CONFIGS), seed)
