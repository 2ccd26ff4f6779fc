"""How long a test waits for a program, a thread or a server before calling it hung.

A guard against a hang, never a speed check: speed is measured by benchmarks/, not asserted. On the
2-core development machine, shared with other jobs (load average up to 10), a program that imports
TensorFlow takes up to a minute to start and a small training a few minutes, so one generous guard
covers every wait; Bazel's timeout of each target (its size in tests/BUILD) is the outer guard.
"""

SECONDS = 600
