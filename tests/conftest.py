"""What pytest does for every test module, under Bazel or from a checkout.

* Where Bazel asks for a test's results as JUnit XML ($XML_OUTPUT_FILE), pytest writes them there, one
  <testcase> per test function, so that scripts/test counts test functions passed, failed and
  skipped (tests/tally.py), not targets.
* A test parametrized over real sample files that are absent (sample_data.files) is skipped, or
  fails under CI, with the path it looked for, before it runs.
"""

import os

import pytest

import sample_data


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml plugin reads the option
def pytest_configure(config):
  xml_output = os.environ.get("XML_OUTPUT_FILE")
  if xml_output and not config.option.xmlpath:
    config.option.xmlpath = xml_output
  config.addinivalue_line("markers", "sample(pattern): the real sample files the test needs (sample_data.files)")


def pytest_runtest_setup(item):
  for mark in item.iter_markers("sample"):
    sample_data.require_sample(*mark.args)
