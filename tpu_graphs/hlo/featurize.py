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
    kernel_modules(optimized_hlo_module) -> [HloModuleProto] (one per fusion)
    kernel_graph(kernel_module)          -> TileGraph     (unlabelled, one empty tile config)
    read_hlo_file(path)                  -> the proto in a .pb file, whichever kind (an HloProto's module)

Tuning data nobody has measured yet (the module and its configurable nodes, no runs: a program
before an autotuner has run it) gives graphs without configs, to rank through candidates
(candidates.py). The C++ featurizer (native/hlo) computes the same arrays, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Union

import numpy as np
from google.protobuf import message as protobuf_message
import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

from tpu_graphs.data import graphs
from tpu_graphs.data import storage
from tpu_graphs.hlo import features
from tpu_graphs.hlo import opcodes
from tpu_graphs.hlo import tuning_pb2

# Computations whose names contain these words end a `node_splits` segment (the release marks
# the boundaries of the program's major computations, not of fusion bodies or reducers).
_SPLIT_COMPUTATION_WORDS = ("cluster", "while", "cond")
# HLO text (HloModule::ToString, XLA's *.txt dumps) starts so: no proto, refused as such.
_HLO_TEXT_START = b"HloModule "

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


def _shape_problem(shape) -> Optional[str]:
  """Why an instruction's shape (or a tuple element of it) is not a shape, or None."""
  if any(size < 0 for size in shape.dimensions):
    return f"has a negative dimension in its shape {list(shape.dimensions)}"
  for element in shape.tuple_shapes:
    problem = _shape_problem(element)
    if problem:
      return problem
  return None


def _first_in_cycle(successors: dict) -> Optional[object]:
  """A key of `successors` (key -> keys it depends on) that lies on or behind a cycle, or None.

  Kahn's algorithm: repeatedly drop what depends on nothing left; what cannot be dropped waits
  on a cycle.
  """
  waiting = {key: len(set(after)) for key, after in successors.items()}
  dependents: dict = {}
  for key, after in successors.items():
    for other in set(after):
      dependents.setdefault(other, []).append(key)
  ready = [key for key, count in waiting.items() if count == 0]
  while ready:
    key = ready.pop()
    for dependent in dependents.get(key, ()):
      waiting[dependent] -= 1
      if waiting[dependent] == 0:
        ready.append(dependent)
  stuck = [key for key, count in waiting.items() if count > 0]
  if not stuck:
    return None
  # Walk back along dependencies that are stuck too until a key repeats: it is on the cycle.
  seen, key = set(), stuck[0]
  while key not in seen:
    seen.add(key)
    key = next(other for other in successors[key] if waiting.get(other, 0) > 0)
  return key


def check_module(module: hlo_pb2.HloModuleProto, source: str) -> None:
  """Raises GraphFileError, naming the module, the instruction and the problem, if `module` is not a
  well-formed HLO module: no entry computation, a computation whose root is not one of its
  instructions, an instruction id used twice, an operand that is no instruction of the same
  computation (dangling), a negative dimension, a data-flow cycle (an instruction that is its own
  operand included) or computations that call each other in a cycle. The one check of a module,
  before anything reads it."""
  def refuse(problem: str):
    named = f"{module.name!r}" in source  # e.g. "HLO module 'x'", else a file: name the module too
    raise graphs.GraphFileError(source, problem if named else f"module {module.name!r}: {problem}")

  if not any(c.instructions for c in module.computations):
    refuse("the module has no instructions")
  computations = {c.id: c for c in module.computations}
  if module.entry_computation_id not in computations:  # XLA finds the entry by id alone, and refuses the module
    refuse(f"has no entry computation (entry_computation_id {module.entry_computation_id} names none of its "
           f"{len(computations)} computations, as XLA requires)")
  computation_of = {}
  for computation in module.computations:
    for instruction in computation.instructions:
      if instruction.id in computation_of:
        refuse(f"instruction id {instruction.id} ({instruction.name!r}) appears twice")
      computation_of[instruction.id] = computation.id
  for computation in module.computations:
    if computation.instructions and computation_of.get(computation.root_id) != computation.id:
      refuse(f"computation {computation.name!r} has root id {computation.root_id}, none of its instructions")
    operands = {}
    for instruction in computation.instructions:
      problem = _shape_problem(instruction.shape)
      if problem:
        refuse(f"instruction {instruction.name!r} {problem}")
      for operand_id in instruction.operand_ids:
        if operand_id == instruction.id:
          refuse(f"instruction {instruction.name!r} is its own operand (a cycle)")
        if computation_of.get(operand_id) != computation.id:
          refuse(f"instruction {instruction.name!r} has operand id {operand_id}, which no instruction of "
                 f"computation {computation.name!r} has (a dangling operand)")
      for callee in instruction.called_computation_ids:
        if callee not in computations:
          refuse(f"instruction {instruction.name!r} calls computation id {callee}, which the module lacks")
      operands[instruction.id] = list(instruction.operand_ids)
    cyclic = _first_in_cycle(operands)
    if cyclic is not None:
      names = {i.id: i.name for i in computation.instructions}
      refuse(f"instruction {names[cyclic]!r} depends on itself through its operands (a cycle in computation "
             f"{computation.name!r})")
  calls = {c.id: [callee for i in c.instructions for callee in i.called_computation_ids if callee in computations]
           for c in module.computations}
  cyclic = _first_in_cycle(calls)
  if cyclic is not None:
    refuse(f"computation {computations[cyclic].name!r} calls itself, directly or through others (a cycle)")


def module_features(module: hlo_pb2.HloModuleProto, source: Optional[str] = None) -> ModuleFeatures:
  """Featurizes every instruction of every computation of `module`.

  Args:
    module: the HLO module.
    source: what to name in errors (a file); defaults to the module's name.

  Raises:
    graphs.GraphFileError: an empty or malformed module (check_module), or an unknown opcode.
  """
  source = source or f"HLO module {module.name!r}"
  check_module(module, source)
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


def _called_computations(computations: dict, roots) -> list[int]:
  """Ids of the computations `roots` call, transitively, each after every computation it calls."""
  ordered: list[int] = []

  def visit(computation_id: int) -> None:
    if computation_id in ordered:
      return
    for instruction in computations[computation_id].instructions:
      for callee in instruction.called_computation_ids:
        visit(callee)
    ordered.append(computation_id)

  for computation_id in roots:
    visit(computation_id)
  return ordered


def kernel_modules(module: hlo_pb2.HloModuleProto, source: Optional[str] = None) -> list[hlo_pb2.HloModuleProto]:
  """One module per fusion instruction of `module`, shaped like the release's kernel modules.

  Each holds the computations the fusion calls (transitively, callees first) and an entry
  computation named after the fusion: one parameter per distinct operand, and the fusion as root.
  `source` (a file) is what errors name; defaults to the module.

  Raises:
    graphs.GraphFileError: the module is malformed (check_module) or has no fusion (it was not optimized).
  """
  source = source or f"HLO module {module.name!r}"
  check_module(module, source)
  computations = {c.id: c for c in module.computations}
  instructions = {i.id: i for c in module.computations for i in c.instructions}
  fusions = [(c, i) for c in module.computations for i in c.instructions if i.opcode == "fusion"]
  # A fusion nested inside another fusion's computations belongs to that kernel.
  fused = set(_called_computations(computations, [cid for _, i in fusions for cid in i.called_computation_ids]))
  fusions = [fusion for computation, fusion in fusions if computation.id not in fused]
  if not fusions:
    named = "" if f"{module.name!r}" in source else f"module {module.name!r} "
    raise graphs.GraphFileError(source, f"{named}has no fusion instruction to make a kernel of: kernels need the "
                                "optimized HLO (stage='optimized_hlo_serialized', or XLA's *after_optimizations.hlo.pb "
                                "dump), not the unoptimized one (stage='hlo_serialized')")
  next_id = 1 + max(instructions)
  kernels = []
  for fusion in fusions:
    kernel = hlo_pb2.HloModuleProto(name=fusion.name, entry_computation_name=fusion.name)
    called = _called_computations(computations, fusion.called_computation_ids)
    kernel.computations.extend(computations[c] for c in called)
    entry = kernel.computations.add(name=fusion.name, id=next_id)
    parameter_ids = {}
    for number, operand_id in enumerate(dict.fromkeys(fusion.operand_ids)):
      parameter = entry.instructions.add(
          name=f"parameter.{number}", opcode="parameter", id=next_id + 1 + number, parameter_number=number)
      parameter.shape.CopyFrom(instructions[operand_id].shape)
      parameter_ids[operand_id] = parameter.id
    root = entry.instructions.add()
    root.CopyFrom(fusion)
    del root.operand_ids[:]
    root.operand_ids.extend(parameter_ids[o] for o in fusion.operand_ids)
    entry.root_id = root.id
    kernel.entry_computation_id = entry.id
    kernels.append(kernel)
  return kernels


def kernel_graph(kernel: hlo_pb2.HloModuleProto, collection: str = "tile:xla",
                 source: Optional[str] = None) -> graphs.TileGraph:
  """An unlabelled tile graph of one kernel module, with one empty tile-size config."""
  source = source or f"HLO kernel module {kernel.name!r}"
  nodes = module_features(kernel, source)
  arrays = dict(node_feat=nodes.node_feat, node_opcode=nodes.node_opcode, edge_index=nodes.edge_index,
                config_feat=features.tile_config_features(tuning_pb2.TileSizeConfig())[np.newaxis],
                config_runtime=np.zeros(1, np.int64), config_runtime_normalizers=np.ones(1, np.int64))
  return graphs.validate_graph(source, kernel.name, collection, UNLABELLED_SPLIT, arrays)


HloProto = Union[hlo_pb2.HloModuleProto, tuning_pb2.ModuleTuningData, tuning_pb2.TuningData]


def _looks_like_module(module) -> bool:
  return bool(module.computations) and all(c.instructions for c in module.computations) and all(
      i.opcode for c in module.computations for i in c.instructions)


def _is_plausibly(parsed) -> bool:
  """Whether a successful parse is plausibly the message it was parsed as.

  Protobuf parsing accepts bytes of another message type whenever the wire types happen to
  agree, so the content decides: each kind must carry what its producer always writes. Tuning
  data may have no runs yet (nothing measured); a program's still lists its configurable nodes.
  """
  if isinstance(parsed, tuning_pb2.TuningData):
    return bool(parsed.modules) and all(
        _looks_like_module(m.module) and all(r.WhichOneof("config") == "op_config" for r in m.runs)
        for m in parsed.modules)
  if isinstance(parsed, tuning_pb2.ModuleTuningData):
    return (_looks_like_module(parsed.module) and bool(parsed.config_index_to_node)
            and all(r.WhichOneof("config") == "module_config" for r in parsed.runs))
  if isinstance(parsed, hlo_pb2.HloProto):
    return _looks_like_module(parsed.hlo_module)
  return _looks_like_module(parsed)


def parse_hlo_proto(data: bytes, source: str) -> HloProto:
  """Parses serialized bytes as ModuleTuningData, TuningData, HloModuleProto or HloProto (what
  XLA's --xla_dump_hlo_as_proto writes, `*.hlo.pb`), whichever fits; an HloProto gives its module.

  Raises:
    graphs.GraphFileError: the bytes are none of them (not a proto, truncated, or another message).
  """
  if not data:
    raise graphs.GraphFileError(source, "the file is empty")
  if data.lstrip().startswith(_HLO_TEXT_START):
    raise graphs.GraphFileError(source, "holds HLO text (it starts with 'HloModule'), not a serialized proto; pass "
                                "the module as a proto: XLA writes one per module with --xla_dump_hlo_as_proto "
                                "(*.hlo.pb)")
  for kind in (tuning_pb2.ModuleTuningData, tuning_pb2.TuningData, hlo_pb2.HloModuleProto, hlo_pb2.HloProto):
    try:
      parsed = kind.FromString(data)
    except protobuf_message.DecodeError:
      continue
    if _is_plausibly(parsed):
      return parsed.hlo_module if isinstance(parsed, hlo_pb2.HloProto) else parsed
  raise graphs.GraphFileError(source, "not a serialized ModuleTuningData, TuningData, HloModuleProto or HloProto "
                      "(not a protocol buffer, truncated, or missing computations / configurable nodes / runs)")


def read_hlo_file(path: Union[str, os.PathLike]) -> HloProto:
  """Reads a .pb file (local or a URL) holding a ModuleTuningData, TuningData, HloModuleProto or HloProto."""
  path = storage.as_path(path)
  problem = storage.file_problem(path)
  if problem:
    raise graphs.GraphFileError(path, problem)
  try:
    with storage.open_binary(path) as stream:
      data = stream.read()
  except OSError as error:
    raise graphs.GraphFileError(path, f"cannot read the file ({error.strerror or error})") from None
  except tf.errors.OpError as error:
    raise graphs.GraphFileError(path, f"cannot read the file ({error.message})") from None
  return parse_hlo_proto(data, str(path))


def graphs_of_proto(proto: HloProto, kernels: bool = False, source: Optional[str] = None) -> list[graphs.Graph]:
  """The graphs a proto holds: a ModuleTuningData's layout graph, a TuningData's tile graph per
  kernel, a bare module's unlabelled program graph or, with `kernels` (an optimized module), one
  unlabelled tile graph per fusion. `source` (a file) is what errors name."""
  if isinstance(proto, tuning_pb2.ModuleTuningData):
    return [layout_graph(proto, source=source)]
  if isinstance(proto, tuning_pb2.TuningData):
    return tile_graphs(proto, source=source)
  if kernels:
    return [kernel_graph(k, source=source and f"{source} (fusion {k.name!r})") for k in kernel_modules(proto, source)]
  return [program_graph(proto, source=source)]


def graphs_from_file(path: Union[str, os.PathLike], kernels: bool = False) -> list[graphs.Graph]:
  """The graphs in a .pb file, whatever it holds (graphs_of_proto), errors naming the file."""
  return graphs_of_proto(read_hlo_file(path), kernels, str(path))
