"""XLA HLO modules and their tuning data -> TpuGraphs graphs (the release's npz format).

A pure-Python replacement for the release's C++ feature extractor. Node order is the proto's
order (computations in module order, instructions in computation order); node i is
`ModuleFeatures.instructions[i]`. Edges follow the dataset convention `[consumer, producer]`:
one per distinct operand of an instruction, plus one from an instruction to the root of each
computation it calls (fusions, reducers, loop bodies), sorted.

    module_features(hlo_module)          -> ModuleFeatures (nodes, edges, splits, id <-> node)
    layout_graph(module_tuning_data)     -> LayoutGraph   (successful runs only; none before any run)
    tile_graphs(tuning_data)             -> [TileGraph]   (one per kernel, successful runs only)
    program_graph(hlo_module)            -> LayoutGraph   (unlabelled, its own layouts as config)
    fusion_kernels.kernel_modules(opt.)  -> [HloModuleProto] (one per fusion, fusion_kernels.py)
    kernel_graph(kernel_module)          -> TileGraph     (unlabelled, one empty tile config)
    graphs_from_file(path)               -> [Graph] of a .pb file, whichever kind (hlo_input.py reads it)

Tuning data nobody has measured yet (the module and its configurable nodes, no runs: a program
before an autotuner has run it) gives graphs without configs, to rank through candidates
(candidates.py). The C++ featurizer (native/hlo) computes the same arrays, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Union

import numpy as np
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.hlo import features
from tpu_graphs.hlo import hlo_input
from tpu_graphs.hlo import fusion_kernels
from tpu_graphs.hlo import module_check
from tpu_graphs.hlo import opcodes
from tpu_graphs.hlo import tuning_pb2

# Computations whose names contain these words end a `node_splits` segment (the release marks
# the boundaries of the program's major computations, not of fusion bodies or reducers).
_SPLIT_COMPUTATION_WORDS = ("cluster", "while", "cond")

# Opcodes whose layouts the release's layout collection configures.
CONFIGURABLE_OPCODES = frozenset({"convolution", "dot", "reshape"})
# Graphs of programs nobody measured are unlabelled, like the release's test split: runtime 0
# (and normalizer 1).
UNLABELLED_SPLIT = "test"


@dataclasses.dataclass(frozen=True)
class ModuleFeatures:
  """The graph of one HloModuleProto, before any configuration is attached.

  Shapes: node_feat (n, 140) float32; node_opcode (n,) uint8; edge_index (m, 2) int64 rows
  [consumer, producer]; node_splits (1, k) int64 node offsets of computation boundaries;
  instructions: the n HloInstructionProto in node order (their `shape` holds dimensions and
  layout, `name` and `id` identify them); computation_of_node (n,) int64 index into
  module.computations; node_by_instruction_id: HLO instruction id -> node index.
  """

  name: str
  node_feat: np.ndarray
  node_opcode: np.ndarray
  edge_index: np.ndarray
  node_splits: np.ndarray
  instructions: tuple
  computation_of_node: np.ndarray
  node_by_instruction_id: dict = dataclasses.field(repr=False, compare=False)

  @property
  def num_nodes(self) -> int:
    return int(self.node_opcode.shape[0])


def module_features(module: hlo_pb2.HloModuleProto, source: Optional[str] = None) -> ModuleFeatures:
  """Featurizes every instruction of every computation of `module`.

  Args:
    module: the HLO module.
    source: what to name in errors (a file); defaults to the module's name.

  Raises:
    graphs.GraphFileError: an empty or malformed module (check_module), or an unknown opcode.
  """
  source = source or f"HLO module {module.name!r}"
  module_check.check_module(module, source)
  instructions, computation_of_node, is_root = [], [], []
  splits, count = [0], 0
  root_of_computation = {}
  for c, computation in enumerate(module.computations):
    root_of_computation[computation.id] = computation.root_id
    for instruction in computation.instructions:
      instructions.append(instruction)
      computation_of_node.append(c)
      is_root.append(instruction.id == computation.root_id)
    count += len(computation.instructions)
    if any(word in computation.name for word in _SPLIT_COMPUTATION_WORDS):
      splits.append(count)
  if splits[-1] < count:
    splits.append(count)

  node_by_id = {}
  for i, instruction in enumerate(instructions):
    if instruction.id in node_by_id:
      raise graphs.GraphFileError(source, f"instruction id {instruction.id} ({instruction.name!r}) appears twice")
    node_by_id[instruction.id] = i
  node_opcode = np.empty(len(instructions), np.uint8)
  node_feat = np.empty((len(instructions), len(features.NODE_FEATURE_NAMES)), np.float32)
  edges = []
  for i, instruction in enumerate(instructions):
    opcode = opcodes.OPCODE_IDS.get(instruction.opcode)
    if opcode is None:
      raise graphs.GraphFileError(source, f"instruction {instruction.name!r} has opcode {instruction.opcode!r}, which "
                          "the TpuGraphs opcode numbering does not know")
    node_opcode[i] = opcode
    node_feat[i] = features.node_features(instruction, is_root[i])
    for operand_id in sorted(set(instruction.operand_ids)):
      if operand_id not in node_by_id:
        raise graphs.GraphFileError(source, f"instruction {instruction.name!r} has operand id {operand_id}, "
                            "which no instruction has")
      edges.append((i, node_by_id[operand_id]))
    for computation_id in instruction.called_computation_ids:
      root_id = root_of_computation.get(computation_id)
      if root_id not in node_by_id:
        raise graphs.GraphFileError(source, f"instruction {instruction.name!r} calls computation id {computation_id}, "
                            "which the module lacks or which has no root")
      edges.append((i, node_by_id[root_id]))
  edge_index = np.unique(np.asarray(edges, np.int64).reshape(-1, 2), axis=0)
  return ModuleFeatures(
      name=module.name, node_feat=node_feat, node_opcode=node_opcode, edge_index=edge_index,
      node_splits=np.asarray([splits], np.int64), instructions=tuple(instructions),
      computation_of_node=np.asarray(computation_of_node, np.int64), node_by_instruction_id=node_by_id)


def _successful_runtime(run) -> Optional[int]:
  """The run's runtime in ns, or None when it failed or measured nothing."""
  if run.error or not run.HasField("profile") or run.profile.compute_time_ns <= 0:
    return None
  return int(run.profile.compute_time_ns)


def _without_configs(graph: graphs.Graph) -> graphs.Graph:
  """`graph` (validated with one placeholder config) with none: a program nothing was measured on,
  which the format's files cannot hold (they need configs) but candidates can rank."""
  if isinstance(graph, graphs.TileGraph):
    return dataclasses.replace(graph, config_feat=graph.config_feat[:0], config_runtime=graph.config_runtime[:0],
                               config_runtime_normalizers=graph.config_runtime_normalizers[:0])
  return dataclasses.replace(graph, node_config_feat=graph.node_config_feat[:0],
                             config_runtime=graph.config_runtime[:0])


def layout_graph(tuning: tuning_pb2.ModuleTuningData, graph_id: Optional[str] = None,
                 collection: str = "layout:xla:default", split: Optional[str] = None,
                 source: Optional[str] = None) -> graphs.LayoutGraph:
  """The layout graph of one program: its nodes and one config per successful run; none (and the
  unlabelled split) where the tuning data has no runs yet.

  `config_index_to_node` lists node indices (positions in node order, as in the release's
  `node_config_ids`). Runs that failed, have no profile, or are not layout configs are dropped.

  Raises:
    graphs.GraphFileError: runs none of which succeeded, no configurable node, or a config that does not fit.
  """
  source = source or f"layout tuning data of module {tuning.module.name!r}"
  module = module_features(tuning.module, source)
  node_config_ids = np.asarray(tuning.config_index_to_node, np.int64)
  if node_config_ids.size == 0:
    raise graphs.GraphFileError(source, "config_index_to_node is empty: no configurable node")
  if node_config_ids.max() >= module.num_nodes:
    raise graphs.GraphFileError(source, f"config_index_to_node holds {node_config_ids.max()}, beyond the "
                        f"{module.num_nodes} nodes")
  config_feats, runtimes = [], []
  for r, run in enumerate(tuning.runs):
    runtime = _successful_runtime(run)
    if runtime is None or not run.module_config.HasField("layout_config"):
      continue
    try:
      config = features.layout_config_features(run.module_config.layout_config)
    except features.LayoutConfigError as error:
      raise graphs.GraphFileError(source, f"run {r}: {error}") from None
    if config.shape[0] != node_config_ids.size:
      raise graphs.GraphFileError(source, f"run {r} configures {config.shape[0]} nodes, config_index_to_node "
                          f"lists {node_config_ids.size}")
    config_feats.append(config)
    runtimes.append(runtime)
  measured = bool(tuning.runs)
  if measured and not runtimes:
    raise graphs.GraphFileError(source, f"none of the {len(tuning.runs)} runs succeeded with a layout config")
  if not measured:  # validated with a placeholder config, returned without
    config_feats, runtimes = [np.full((node_config_ids.size, 18), -1, np.float32)], [0]
  arrays = dict(node_feat=module.node_feat, node_opcode=module.node_opcode, edge_index=module.edge_index,
                node_config_ids=node_config_ids, node_config_feat=np.stack(config_feats),
                config_runtime=np.asarray(runtimes, np.int64), node_splits=module.node_splits)
  graph = graphs.validate_graph(source, graph_id or tuning.module.name, collection,
                                split if measured else UNLABELLED_SPLIT, arrays)
  return graph if measured else _without_configs(graph)


def tile_graph(tuning: tuning_pb2.ModuleTuningData, graph_id: Optional[str] = None,
               collection: str = "tile:xla", split: Optional[str] = None,
               source: Optional[str] = None) -> graphs.TileGraph:
  """The tile graph of one kernel: its nodes and one config per successful tile-size run; none (and
  the unlabelled split) where the tuning data has no runs yet.

  Runtimes are normalized by the default config's runtime (`config_runtime_normalizers`, the
  same value for every config). Failed runs and runs measuring <= 1 ns are dropped.

  Raises:
    graphs.GraphFileError: a run without a tile-size config, no successful run, or no successful default.
  """
  source = source or f"tile tuning data of module {tuning.module.name!r}"
  module = module_features(tuning.module, source)
  config_feats, runtimes, default_runtime = [], [], None
  for r, run in enumerate(tuning.runs):
    if not run.op_config.HasField("tile_size_config"):
      raise graphs.GraphFileError(source, f"run {r} has no tile_size_config")
    runtime = _successful_runtime(run)
    if runtime is None or runtime <= 1:
      continue
    if run.is_default and default_runtime is None:
      default_runtime = runtime
    config_feats.append(features.tile_config_features(run.op_config.tile_size_config))
    runtimes.append(runtime)
  measured = bool(tuning.runs)
  if measured and not runtimes:
    raise graphs.GraphFileError(source, f"none of the {len(tuning.runs)} runs succeeded")
  if measured and default_runtime is None:
    raise graphs.GraphFileError(source, "no successful default run to normalize runtimes by")
  if not measured:  # validated with a placeholder config, returned without
    config_feats, runtimes, default_runtime = [features.tile_config_features(tuning_pb2.TileSizeConfig())], [0], 1
  arrays = dict(node_feat=module.node_feat, node_opcode=module.node_opcode, edge_index=module.edge_index,
                config_feat=np.stack(config_feats), config_runtime=np.asarray(runtimes, np.int64),
                config_runtime_normalizers=np.full(len(runtimes), default_runtime, np.int64))
  graph = graphs.validate_graph(source, graph_id or tuning.module.name, collection,
                                split if measured else UNLABELLED_SPLIT, arrays)
  return graph if measured else _without_configs(graph)


def tile_graphs(tuning: tuning_pb2.TuningData, collection: str = "tile:xla", split: Optional[str] = None,
                source: Optional[str] = None) -> list[graphs.TileGraph]:
  """One TileGraph per kernel that was tuned (more than one run), named after its module; where no
  kernel has run yet, one without configs per kernel."""
  source = source or "tile tuning data"
  measured = any(m.runs for m in tuning.modules)
  kernels = [m for m in tuning.modules if (len(m.runs) > 1 or not measured) and m.HasField("module")]
  if not kernels:
    raise graphs.GraphFileError(source, f"none of the {len(tuning.modules)} modules has more than one run")
  return [tile_graph(m, m.module.name, collection, split, f"{source} (module {m.module.name!r})")
          for m in kernels]


def _as_found_layout_config(module: ModuleFeatures) -> tuple[np.ndarray, tuning_pb2.LayoutConfig]:
  """Configurable node indices (nc,) and a LayoutConfig of their current layouts.

  Each node's tensors are its result, then its operands (at most 3 in all), each as the
  features.CONFIGURED_LAYOUT_DIMS minor-most dimensions of its shape's layout.
  """
  config = tuning_pb2.LayoutConfig()
  node_ids = [i for i, inst in enumerate(module.instructions) if inst.opcode in CONFIGURABLE_OPCODES]
  for i in node_ids:
    instruction = module.instructions[i]
    operands = [module.instructions[module.node_by_instruction_id[o]] for o in instruction.operand_ids]
    node = config.nodes.add()
    for tensor in ([instruction] + operands)[:features.LAYOUT_MAX_TENSORS]:
      node.tensors.add().dims.extend(tensor.shape.layout.minor_to_major[:features.CONFIGURED_LAYOUT_DIMS])
  return np.asarray(node_ids, np.int64), config


def program_graph(module: hlo_pb2.HloModuleProto, graph_id: Optional[str] = None,
                  collection: str = "layout:xla:default", source: Optional[str] = None) -> graphs.LayoutGraph:
  """An unlabelled layout graph of a whole module, with one config: the layouts it carries.

  Its configurable nodes are the convolutions, dots and reshapes (CONFIGURABLE_OPCODES).
  """
  source = source or f"HLO module {module.name!r}"
  nodes = module_features(module, source)
  node_config_ids, config = _as_found_layout_config(nodes)
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                node_config_ids=node_config_ids,
                node_config_feat=features.layout_config_features(config)[np.newaxis],
                config_runtime=np.zeros(1, np.int64), node_splits=nodes.node_splits)
  return graphs.validate_graph(source, graph_id or module.name, collection, UNLABELLED_SPLIT, arrays)


def kernel_graph(kernel: hlo_pb2.HloModuleProto, collection: str = "tile:xla",
                 source: Optional[str] = None) -> graphs.TileGraph:
  """An unlabelled tile graph of one kernel module, with one empty tile-size config."""
  source = source or f"HLO kernel module {kernel.name!r}"
  nodes = module_features(kernel, source)
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                config_feat=features.tile_config_features(tuning_pb2.TileSizeConfig())[np.newaxis],
                config_runtime=np.zeros(1, np.int64), config_runtime_normalizers=np.ones(1, np.int64))
  return graphs.validate_graph(source, kernel.name, collection, UNLABELLED_SPLIT, arrays)


def graphs_of_proto(proto: hlo_input.HloProto, kernels: bool = False, source: Optional[str] = None) -> list[graphs.Graph]:
  """The graphs a proto holds: a ModuleTuningData's layout graph, a TuningData's tile graph per
  kernel, a bare module's unlabelled program graph or, with `kernels` (an optimized module), one
  unlabelled tile graph per fusion. `source` (a file) is what errors name."""
  if isinstance(proto, tuning_pb2.ModuleTuningData):
    return [layout_graph(proto, source=source)]
  if isinstance(proto, tuning_pb2.TuningData):
    return tile_graphs(proto, source=source)
  if kernels:
    return [kernel_graph(k, source=source and f"{source} (fusion {k.name!r})") for k in
            fusion_kernels.kernel_modules(proto, source)]
  return [program_graph(proto, source=source)]


def graphs_from_file(path: Union[str, os.PathLike], kernels: bool = False) -> list[graphs.Graph]:
  """The graphs in a .pb file, whatever it holds (graphs_of_proto), errors naming the file."""
  return graphs_of_proto(hlo_input.read_hlo_file(path), kernels, str(path))
