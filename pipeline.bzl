"""The one py_library rule every tpu_graphs subpackage uses (tpu_graphs/<stage>/BUILD loads it)."""

# The pipeline's stages in order (docs/development.md): a stage may import the stages before it, never after.
STAGES = ["data", "hlo", "synth", "models", "train", "export", "analysis"]

def pipeline_stage(name):
    """A py_library of the stage's .py files (other files as data), depending on earlier stages."""
    native.py_library(
        name = name,
        srcs = native.glob(["**/*.py"]),
        data = native.glob(["**"], exclude = ["**/*.py", "**/__pycache__/**", "BUILD"]),
        deps = ["//tpu_graphs:package_init"] + ["//tpu_graphs/" + stage for stage in STAGES[:STAGES.index(name)]],
        visibility = ["//visibility:public"],
    )
