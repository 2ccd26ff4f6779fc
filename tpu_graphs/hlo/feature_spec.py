"""docs/features.md, the feature specification, rendered from the tables the featurizer computes with.

Every column the featurizer writes (140 node features, 24 tile config values, 18 layout config
values per configurable node) is a row of one of the FeatureGroup tables in features.py, and so is
every row of the document: a change of a column's index, name or meaning in the code changes the
rendered document, and tests/hlo/test_feature_spec.py fails until docs/features.md is regenerated:

  .venv/bin/python -m tpu_graphs.hlo.feature_spec > docs/features.md
"""

from __future__ import annotations

from typing import Sequence

from tpu_graphs.hlo import features, opcodes

DOCUMENT_PATH = "docs/features.md"

_INTRODUCTION = """\
# Feature specification

What each number of a TpuGraphs graph means and how it is computed from an XLA HLO module, precise
enough to reimplement the featurizer and to read a model's inputs. The columns are those of the
public release's npz files; `tpu_graphs/hlo/featurize.py` computes them from protos with the
tables in `tpu_graphs/hlo/features.py`, and `native/hlo` computes the same arrays in C++ (what a
compiler links, [compiler.md](compiler.md)), bit for bit: tests/native/test_native_featurizer.py and
tests/native/test_native_zoo.py compare the two on the real sample's protos, on modules XLA dumps itself
and on every program of the generated zoo.

This file is generated from those tables; do not edit it by hand. After changing a table, run

<!-- doc-test: skip: rewrites this file; tests/hlo/test_feature_spec.py checks that it is current -->
```sh
.venv/bin/python -m tpu_graphs.hlo.feature_spec > docs/features.md
```

## Conventions

- **Protos.** Node features read an `xla.HloInstructionProto` (`xla/service/hlo.proto` of the XLA
  that TensorFlow ships; element types from `xla/xla_data.proto`); tile and layout config values
  read `TileSizeConfig` and `LayoutConfig` of `tpu_graphs/hlo/tuning.proto`, wire-compatible with
  the release's raw protos. A field an instruction does not set reads as the proto default (0,
  false, empty).
- **Values** are float32: each integer field converted to float32 (exact below 2^24; a larger sum or
  product, such as the element count of a big tensor, is rounded to the nearest float32). Sums and
  products are computed exactly (unbounded integers), rounded to the nearest double, then to the
  nearest float32, as Python's `float()` and numpy do.
- **Sequences.** A repeated field becomes its first k entries (`_0` .. `_{k-1}`; 0 where the
  sequence is shorter, entries past k are dropped) and, for most fields, the sum and product over
  *all* of its entries (`_sum`, `_product`). The product of an empty sequence is 1 for node
  features and 0 for tile config values. Flags (`window_reversal`) give a true and a false count
  instead. A 0 that pads a sequence of dimension numbers (`dimensions_i`,
  `layout_minor_to_major_i`) reads like dimension 0; the result's rank (how many
  `shape_dimensions_i` are set) tells them apart for the layout.
- **Element types** are one-hot over the 19 types listed; a type outside the list (e.g. F8E5M2,
  S4) sets none of the 19 columns. A tuple-shaped result has element type TUPLE and no dimensions.
- **Nodes** are the instructions of every computation of the module, computations in module order
  and instructions in computation order (fusion bodies, reducers and loop bodies included). Node
  i's `node_opcode` is the dataset id of its opcode (table below). `edge_index` holds one row
  `[consumer, producer]` per distinct operand of an instruction, plus one from an instruction to
  the root of each computation it calls (`called_computation_ids`), rows sorted and unique.
- **Configurable nodes** of a layout graph (`node_config_ids`) are the nodes whose layouts a
  configuration sets: in the release, the instructions listed by the tuning data's
  `config_index_to_node`; in program graphs of new code, every convolution, dot and reshape.
"""


def _escape(text: str) -> str:
  return text.replace("|", "\\|")


def _table(groups: Sequence[features.FeatureGroup], first_column: str) -> list[str]:
  """One Markdown row per column of `groups`, indices from 0."""
  lines = [f"| {first_column} | name | meaning | units | computed from |", "|---:|---|---|---|---|"]
  index = 0
  for group in groups:
    for name, meaning in zip(group.names, group.meanings):
      lines.append(f"| {index} | `{name}` | {_escape(meaning)} | {_escape(group.units)} | `{group.source}` |")
      index += 1
  return lines


def render() -> str:
  """The whole of docs/features.md."""
  sections = [_INTRODUCTION]
  sections.append(f"## Node features ({len(features.NODE_FEATURE_NAMES)} per node, `node_feat`)\n\n"
                  "One row per HLO instruction; `computed from` names the field of its `HloInstructionProto` "
                  "(`root_id` is the enclosing `HloComputationProto`'s).\n\n" +
                  "\n".join(_table(features.NODE_FEATURE_GROUPS, "index")))
  sections.append(f"## Tile config values ({len(features.TILE_CONFIG_FEATURE_NAMES)} per config, `config_feat`)\n\n"
                  "One row per tile-size configuration of a kernel (a fusion), from its `TileSizeConfig`. A "
                  "kernel of new code, featurized before any tuning, gets one all-zero row.\n\n" +
                  "\n".join(_table(features.TILE_CONFIG_FEATURE_GROUPS, "index")))
  sections.append(f"## Layout config values ({len(features.LAYOUT_CONFIG_FEATURE_NAMES)} per configurable node, "
                  "`node_config_feat`)\n\n"
                  "Row `[j, k]` describes configurable node `node_config_ids[k]` under configuration j: "
                  "`LayoutConfig.nodes[k]`, whose `tensors` give a minor-to-major dimension order for up to three "
                  "of the node's tensors (more is an error). For example `1, 0, 2, -1, -1, -1` lays out a 3-d "
                  "tensor with dimension 1 most minor (its elements consecutive in memory) and dimension 2 most "
                  "major. A program graph of new code gets one configuration: the layouts its instructions "
                  "carry.\n\n" + "\n".join(_table(features.LAYOUT_CONFIG_FEATURE_GROUPS, "index")))
  opcode_rows = ["| id | opcode |", "|---:|---|"] + [
      f"| {number} | `{name}`{' (retired)' if name in opcodes.RETIRED_OPCODES else ''} |"
      for name, number in opcodes.OPCODE_IDS.items()]
  sections.append("## Opcode ids (`node_opcode`)\n\n"
                  "The release's frozen numbering of `HloInstructionProto.opcode` (`tpu_graphs/hlo/opcodes.py`); id 0 "
                  "is reserved, and an opcode not listed is an error.\n\n" + "\n".join(opcode_rows))
  return "\n\n".join(section.rstrip("\n") for section in sections) + "\n"


if __name__ == "__main__":
  print(render(), end="")
