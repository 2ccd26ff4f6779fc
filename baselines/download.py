"""Downloads, verifies and extracts the TpuGraphs release, then prints what is on disk.

  python baselines/download.py --list
  python baselines/download.py --collections=tile:xla,layout:xla:default --dest=~/data/tpugraphs

Interrupted runs continue where they stopped; finished archives are skipped on a rerun.
"""

import sys

from absl import flags

from baselines import program
from tpu_graphs.data import download
from tpu_graphs.data import graphs
from tpu_graphs.data import statistics

_COLLECTIONS = flags.DEFINE_list("collections", list(graphs.COLLECTIONS),
                                 f"Collections to fetch, from: {', '.join(graphs.COLLECTIONS)}.")
_SPLITS = flags.DEFINE_list("splits", list(graphs.SPLITS), "Splits to fetch: train, valid, test.")
_DEST = flags.DEFINE_string("dest", "~/data/tpugraphs", "Data root; the npz/ tree is extracted under it.")
_BASE_URL = flags.DEFINE_string("base_url", download.RELEASE_URL, "Where the release's tar files are.")
_LIST = flags.DEFINE_bool("list", False, "Only print the archives that would be fetched, with their sizes.")
_WAIT_SECONDS = flags.DEFINE_float("wait_seconds", download.DEFAULT_WAIT_SECONDS,
                                   "Give up after waiting this long, in all, for a server that sends nothing "
                                   "(silent connections and pauses between retries); bytes received restart it.")
program.check_flag(_COLLECTIONS, lambda collections: [download.archive_name(c, "train") for c in collections])
flags.register_validator(_WAIT_SECONDS, lambda value: value > 0, message="--wait_seconds must be positive")
program.check_flag(_SPLITS, lambda splits: [download.archive_name("tile:xla", s) for s in splits])


def main(argv):
  del argv
  wanted = [(collection, split) for collection in _COLLECTIONS.value for split in _SPLITS.value]
  names = [download.archive_name(collection, split) for collection, split in wanted]
  downloader = download.Downloader(_DEST.value, base_url=_BASE_URL.value, wait_seconds=_WAIT_SECONDS.value,
                                  progress=sys.stderr)
  if _LIST.value:
    list_archives(downloader, names)
    return
  for collection, split in wanted:
    downloader.install(collection, split)
  print(statistics.format_table(statistics.directory_statistics(downloader.dest / "npz")))


def list_archives(downloader: download.Downloader, names: list[str]) -> None:
  """Prints each archive's size, whether it is installed, and how much remains to fetch."""
  to_fetch = 0
  for name in names:
    installed = downloader.is_installed(name)
    remote = downloader.describe(name)
    to_fetch += 0 if installed else remote.size
    print(f"{name:36s} {statistics.format_bytes(remote.size):>9s}  "
          f"{'installed' if installed else 'to fetch':9s}  {remote.url}")
  print(f"{statistics.format_bytes(to_fetch)} to fetch into {downloader.dest}")


if __name__ == "__main__":
  program.run(main)
