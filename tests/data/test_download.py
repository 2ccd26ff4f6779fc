"""Downloading the release from a real HTTP server on 127.0.0.1 serving tars of the real sample."""

import base64
import concurrent.futures
import hashlib
import http.server
import io
import pathlib
import re
import socket
import sys
import tarfile
import threading
import time
import urllib.request

import pytest

import hang_guard
import sample_data
from tpu_graphs.data import download, storage
from tpu_graphs.data import graphs

SAMPLE_DIR = sample_data.sample_dir()
# Every (collection, split) the sample holds a folder for.
SAMPLE_SPLITS = [(collection, split) for collection in graphs.COLLECTIONS for split in ("train", "valid", "test")
                 if (SAMPLE_DIR / "npz" / collection.replace(":", "/") / split).is_dir()]


class _ReleaseHandler(http.server.BaseHTTPRequestHandler):
  """Serves files of `server.root` like the release server: sizes, x-goog-hash MD5, Range."""

  def log_message(self, *args):
    pass

  def do_HEAD(self):
    self._serve(send_body=False)

  def do_GET(self):
    self._serve(send_body=True)

  def _serve(self, send_body: bool):
    release = self.server
    name = self.path.rsplit("/", 1)[-1]
    release.requests.append((self.command, name, self.headers.get("Range")))
    path = release.root / name
    if not path.is_file():
      self.send_error(404)
      return
    data = path.read_bytes()
    start = 0
    if self.headers.get("Range") and release.honour_range:
      start = int(re.fullmatch(r"bytes=(\d+)-", self.headers["Range"]).group(1))
      self.send_response(206)
      self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
    else:
      self.send_response(200)
    self.send_header("Content-Length", str(len(data) - start))
    md5 = release.published_md5.get(name, hashlib.md5(data).digest())
    self.send_header("x-goog-hash", f"crc32c=AAAAAA==,md5={base64.b64encode(md5).decode()}")
    self.end_headers()
    if not send_body:
      return
    cut = release.cut_after.pop(name, None)
    if cut is None:
      self.wfile.write(data[start:])
      return
    self.wfile.write(data[start:start + cut])
    self.wfile.flush()
    self.connection.shutdown(socket.SHUT_RDWR)
    self.close_connection = True


@pytest.fixture
def release(tmp_path):
  """A loopback server whose folder holds one tar per sample split, named as in the release."""
  sample_data.require_sample("npz")
  root = tmp_path / "server"
  root.mkdir()
  for collection, split in SAMPLE_SPLITS:
    relative = pathlib.Path("npz", *collection.split(":"), split)
    with tarfile.open(root / download.archive_name(collection, split), "w") as archive:
      for path in sorted((SAMPLE_DIR / relative).glob("*.npz")):
        archive.add(path, arcname=(relative / path.name).as_posix())
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ReleaseHandler)
  server.root, server.requests, server.cut_after, server.published_md5 = root, [], {}, {}
  server.honour_range = True
  server.url = f"http://127.0.0.1:{server.server_address[1]}/v0"
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield server
  server.shutdown()
  server.server_close()


def _downloader(release, dest, progress=None):
  return download.Downloader(dest, base_url=release.url, attempts=3, backoff_seconds=0.0,
                             timeout_seconds=10.0, progress=progress)


def test_archive_names_follow_the_release():
  assert download.archive_name("tile:xla", "train") == "npz_tile_xla_train.tar"
  assert download.archive_name("layout:nlp:random", "valid") == "npz_layout_nlp_random_valid.tar"
  with pytest.raises(ValueError, match="unknown collection"):
    download.archive_name("tile:nlp", "train")


def test_full_download_installs_the_sample_byte_for_byte(release, tmp_path):
  dest = tmp_path / "data"
  progress = io.StringIO()
  downloader = _downloader(release, dest, progress)
  for collection, split in SAMPLE_SPLITS:
    assert downloader.install(collection, split)
  sample_files = sorted(path.relative_to(SAMPLE_DIR) for path in (SAMPLE_DIR / "npz").rglob("*.npz"))
  assert sorted(path.relative_to(dest) for path in (dest / "npz").rglob("*.npz")) == sample_files
  for relative in sample_files:
    assert (dest / relative).read_bytes() == (SAMPLE_DIR / relative).read_bytes()
  leftovers = sorted(path.name for path in dest.iterdir() if path.is_file() and path.name != ".download.lock")
  assert leftovers == sorted(download.archive_name(c, s) + ".done" for c, s in SAMPLE_SPLITS)
  assert "npz_tile_xla_test.tar 100%" in progress.getvalue()


def test_connection_cut_mid_file_is_resumed_to_identical_bytes(release, tmp_path):
  name = download.archive_name("tile:xla", "test")
  size = (release.root / name).stat().st_size
  release.cut_after[name] = size // 2
  downloader = _downloader(release, tmp_path / "data")
  path = downloader.fetch(downloader.describe(name))
  assert path.read_bytes() == (release.root / name).read_bytes()
  assert [request for request in release.requests if request[0] == "GET"] == [
      ("GET", name, None), ("GET", name, f"bytes={size // 2}-")]


def test_partial_file_of_an_earlier_run_is_continued(release, tmp_path):
  name = download.archive_name("layout:xla:default", "valid")
  original = (release.root / name).read_bytes()
  dest = tmp_path / "data"
  dest.mkdir()
  (dest / f"{name}.part").write_bytes(original[:1000])
  downloader = _downloader(release, dest)
  assert downloader.fetch(downloader.describe(name)).read_bytes() == original
  assert release.requests[-1] == ("GET", name, "bytes=1000-")


def test_server_ignoring_range_restarts_from_the_first_byte(release, tmp_path):
  release.honour_range = False
  name = download.archive_name("layout:xla:default", "valid")
  original = (release.root / name).read_bytes()
  dest = tmp_path / "data"
  dest.mkdir()
  (dest / f"{name}.part").write_bytes(b"x" * 1000)
  downloader = _downloader(release, dest)
  assert downloader.fetch(downloader.describe(name)).read_bytes() == original


def test_member_escaping_the_destination_is_refused(release, tmp_path):
  name = download.archive_name("tile:xla", "train")
  sample_file = next((SAMPLE_DIR / "npz" / "tile" / "xla" / "train").glob("*.npz"))
  with tarfile.open(release.root / name, "w") as archive:
    archive.add(sample_file, arcname="npz/tile/xla/train/good.npz")
    archive.add(sample_file, arcname="npz/../../escaped.npz")
  dest = tmp_path / "a" / "data"
  with pytest.raises(download.UnsafeArchiveError, match=re.escape("'npz/../../escaped.npz'")):
    _downloader(release, dest).install("tile:xla", "train")
  assert not (tmp_path / "escaped.npz").exists() and not (tmp_path / "a" / "escaped.npz").exists()
  assert not (dest / "npz").exists()  # nothing at all was extracted
  assert not (dest / f"{name}.done").exists()


def test_link_member_is_refused(tmp_path):
  tar_path = tmp_path / "links.tar"
  with tarfile.open(tar_path, "w") as archive:
    link = tarfile.TarInfo("npz/tile/xla/train/passwd.npz")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive.addfile(link)
  with pytest.raises(download.UnsafeArchiveError, match="link or device"):
    download.extract_archive(tar_path, tmp_path / "data")


def test_rerun_downloads_nothing(release, tmp_path):
  downloader = _downloader(release, tmp_path / "data")
  assert downloader.install("tile:xla", "test")
  release.requests.clear()
  assert not downloader.install("tile:xla", "test")
  assert release.requests == []


def test_installed_archive_with_a_missing_file_is_installed_again(release, tmp_path):
  downloader = _downloader(release, tmp_path / "data")
  downloader.install("tile:xla", "test")
  victim = next((tmp_path / "data" / "npz" / "tile" / "xla" / "test").glob("*.npz"))
  victim.unlink()
  assert downloader.install("tile:xla", "test")
  assert victim.is_file()


def test_checksum_mismatch_is_refused_and_the_file_deleted(release, tmp_path):
  name = download.archive_name("tile:xla", "valid")
  release.published_md5[name] = hashlib.md5(b"something else").digest()
  dest = tmp_path / "data"
  with pytest.raises(download.DownloadError, match=f"{name}.part: has MD5 .* the server published"):
    _downloader(release, dest).install("tile:xla", "valid")
  assert not (dest / f"{name}.part").exists() and not (dest / name).exists()


def test_invalid_graph_file_is_named(release, tmp_path):
  name = download.archive_name("tile:xla", "train")
  broken = tmp_path / "broken.npz"
  broken.write_bytes(b"PK\x03\x04 truncated")
  with tarfile.open(release.root / name, "w") as archive:
    archive.add(broken, arcname="npz/tile/xla/train/broken.npz")
  dest = tmp_path / "data"
  with pytest.raises(download.DownloadError, match=r"1 of 1 files .*\n.*broken\.npz: not a readable npz"):
    _downloader(release, dest).install("tile:xla", "train")
  assert not (dest / f"{name}.done").exists()


def test_graph_outside_its_collection_and_split_is_named(release, tmp_path):
  name = download.archive_name("tile:xla", "train")
  sample_file = next((SAMPLE_DIR / "npz" / "tile" / "xla" / "valid").glob("*.npz"))
  with tarfile.open(release.root / name, "w") as archive:
    archive.add(sample_file, arcname=f"npz/tile/xla/valid/{sample_file.name}")
  with pytest.raises(download.DownloadError, match="lies in tile:xla valid, expected tile:xla train"):
    _downloader(release, tmp_path / "data").install("tile:xla", "train")


def test_missing_archive_names_the_url_without_retrying(release, tmp_path):
  with pytest.raises(download.DownloadError, match=r"/v0/npz_layout_nlp_random_train.tar: HTTP 404"):
    _downloader(release, tmp_path / "data").install("layout:nlp:random", "train")
  assert len(release.requests) == 1


def test_progress_line_shows_bytes_rate_and_eta():
  line = download.format_progress("a.tar", 500_000_000, 2_000_000_000, 100_000_000, 10.0)
  assert line == "a.tar  25% 500.0 MB/2.0 GB 10.0 MB/s ETA 0:02:30"
  assert download.format_progress("a.tar", 0, 100_000, 1, 1.0).endswith("1 B/s ETA 27:46:40")


class _HeadOnlyHandler(http.server.BaseHTTPRequestHandler):
  """Answers HEAD with a size and never answers GET (until the test lets it go): a server that hangs."""

  def do_HEAD(self):  # pylint: disable=invalid-name
    self.send_response(200)
    self.send_header("Content-Length", "1000")
    self.end_headers()

  def do_GET(self):  # pylint: disable=invalid-name
    self.server.released.wait()

  def log_message(self, *args):
    pass



def test_download_from_a_server_that_never_answers_gives_up_within_its_wait_budget(tmp_path, monkeypatch):
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HeadOnlyHandler)
  server.daemon_threads, server.released = True, threading.Event()
  threading.Thread(target=server.serve_forever, daemon=True).start()
  url = f"http://127.0.0.1:{server.server_address[1]}"
  timeouts = []  # every connection's socket timeout: the budget, not timeout_seconds, bounds each wait

  def urlopen(request, timeout):
    timeouts.append(timeout)
    return opened(request, timeout=timeout)

  opened = urllib.request.urlopen
  monkeypatch.setattr(urllib.request, "urlopen", urlopen)
  said = io.StringIO()
  downloader = download.Downloader(tmp_path, base_url=url, backoff_seconds=0.5, timeout_seconds=60.0,
                                   wait_seconds=2.0, progress=said)
  try:
    with pytest.raises(download.DownloadError,
                       match=r"gave up after waiting \d+ s for the server \(--wait_seconds 2\)"):
      downloader.install("tile:xla", "train")
  finally:
    server.released.set()
    server.shutdown()
  assert len(timeouts) >= 2 and max(timeouts) <= 2.0  # the HEAD and at least one GET, none past the budget
  assert f"fetching {url}/{download.archive_name('tile:xla', 'train')}" in said.getvalue()



def test_second_downloader_into_one_folder_waits_for_the_first_and_says_so(release, tmp_path):
  dest, said = tmp_path / "dest", io.StringIO()
  dest.mkdir()
  downloader = _downloader(release, dest, progress=said)
  with storage.exclusive_lock(dest / ".download.lock", lambda: None):  # another downloader is at work
    second = concurrent.futures.ThreadPoolExecutor(1).submit(downloader.install, "tile:xla", "train")
    deadline = time.monotonic() + hang_guard.SECONDS
    while "another download is writing here; waiting" not in said.getvalue() and time.monotonic() < deadline:
      time.sleep(0.05)
    assert "another download is writing here; waiting" in said.getvalue()
    assert not second.done() and not list(dest.glob("*.part"))
  assert second.result(timeout=hang_guard.SECONDS)
  assert downloader.is_installed(download.archive_name("tile:xla", "train"))


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-q"]))
