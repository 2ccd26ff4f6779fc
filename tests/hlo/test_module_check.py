"""The module check (tpu_graphs/hlo/module_check.py): a malformed module is refused by whatever
reads it, the featurizer and the kernel extraction alike, naming the module, the instruction and the
problem (the cases: tests/malformed_modules.py; the native featurizer's twin:
tests/native/test_native_featurizer.py)."""

import sys

import pytest

import malformed_modules

from tpu_graphs.data import graphs
from tpu_graphs.hlo import featurize, fusion_kernels


@pytest.mark.parametrize("module, message", malformed_modules.CASES)
def test_featurizer_refuses_malformed_modules_naming_module_instruction_and_problem(tmp_path, module, message):
  path = tmp_path / "in.pb"
  path.write_bytes(module.SerializeToString())
  with pytest.raises(graphs.GraphFileError, match=message):
    featurize.graphs_from_file(path)
  with pytest.raises(graphs.GraphFileError, match=message):
    fusion_kernels.kernel_modules(module)



if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
