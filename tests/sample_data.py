"""Where the real TpuGraphs sample files are, for tests that read them.

The files (byte copies of the public release, see its README.md) live outside the project in
`<repo>/../shared/tpugraphs_sample` and are never copied in. `TPUGRAPHS_SAMPLE_DIR` overrides the
location. The default is found from this file's real location (symlinks resolved), so it is the
same under pytest in a checkout and inside Bazel's runfiles tree.
"""

import os
import pathlib

import pytest

SAMPLE_DIR_VARIABLE = "TPUGRAPHS_SAMPLE_DIR"


def sample_dir() -> pathlib.Path:
  """The sample folder: $TPUGRAPHS_SAMPLE_DIR, else ../shared/tpugraphs_sample beside the repo."""
  configured = os.environ.get(SAMPLE_DIR_VARIABLE)
  if configured:
    return pathlib.Path(configured)
  return pathlib.Path(__file__).resolve().parents[2] / "shared" / "tpugraphs_sample"


def require_sample(relative_path: str = "") -> pathlib.Path:
  """Returns sample_dir() / relative_path; skips the calling test when that path is absent."""
  path = sample_dir() / relative_path
  if not path.exists():
    pytest.skip(f"real TpuGraphs sample {path} not found: set {SAMPLE_DIR_VARIABLE} or put the "
                "samples in ../shared/tpugraphs_sample beside the repository")
  return path
