"""Reads a built site in headless Chromium, as a reader's browser would.

    python docs/_hooks/browser_check.py SITE_DIR [--screenshots DIR]

Serves ``SITE_DIR`` on 127.0.0.1 and drives Chromium through chromedriver (selenium, from
the ``docs`` extra; Chromium and chromedriver from the system: ``CHROMIUM`` and
``CHROMEDRIVER`` name them, else ``chromium``/``chromedriver`` on ``PATH``). Checks:

* every page loads with no failed request (an HTTP error or a request that did not
  complete, to the site or elsewhere) and no image that failed to decode;
* searching a few public names (typed into the search box) lists the name's API entry
  first.

With ``--screenshots DIR`` it also saves full-width screenshots of a few pages there.
Prints one line per problem and exits with status 1 if there is any.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

# (query, the anchor of the API entry that should come first)
SEARCHES = (
  ("LostUpdateError", "nnx_eqx.LostUpdateError"),
  ("from_eqx", "nnx_eqx.bridge.from_eqx"),
  ("to_eqx_with_state", "nnx_eqx.bridge.to_eqx_with_state"),
  ("split_rngs", "nnx_eqx.split_rngs"),
  ("Optimizer", "nnx_eqx.Optimizer"),
)
# names that are not nnx_eqx's (no entry): search lists every page that writes them
# (up to the first batch of results the search shows)
FINDS = ("filter_jit", "tree_at")
SCREENSHOTS = {
  "home": "",
  "bridge_guide": "guides/bridge/",
  "migration_equinox": "migration/from_equinox/",
  "api_modules": "api/module_system/",
  "notebook_bridge": "notebooks/02_equinox_bridge/",
  "notebook_performance": "notebooks/04_performance/",
}
# the flags a closed network needs (no background or component traffic) and a headless run
CHROMIUM_FLAGS = (
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
  def log_message(self, format, *args):  # noqa: A002 (the base class's name)
    pass


@contextlib.contextmanager
def serve(site: pathlib.Path) -> Iterator[str]:
  """The site served on 127.0.0.1 (a free port) while the block runs; yields its URL."""
  handler = functools.partial(_Quiet, directory=str(site))
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}/"
  finally:
    server.shutdown()
    server.server_close()


def _executable(env: str, name: str) -> str:
  path = os.environ.get(env) or shutil.which(name)
  if not path:
    raise SystemExit(f"{name} not found: install it (Debian: apt-get install {name}) or set {env}")
  return path


@contextlib.contextmanager
def chromium() -> Iterator[object]:
  from selenium import webdriver
  from selenium.webdriver.chrome.service import Service

  options = webdriver.ChromeOptions()
  options.binary_location = _executable("CHROMIUM", "chromium")
  for flag in CHROMIUM_FLAGS:
    options.add_argument(flag)
  options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
  with tempfile.TemporaryDirectory() as profile:
    options.add_argument(f"--user-data-dir={profile}")
    service = Service(executable_path=_executable("CHROMEDRIVER", "chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
      yield driver
    finally:
      driver.quit()


def _failed_requests(driver) -> list[str]:
  """The requests since the last call that failed or got an HTTP error status."""
  urls: dict[str, str] = {}
  failed = []
  for entry in driver.get_log("performance"):
    message = json.loads(entry["message"])["message"]
    method, params = message.get("method"), message.get("params", {})
    if method == "Network.requestWillBeSent":
      urls[params["requestId"]] = params["request"]["url"]
    elif method == "Network.responseReceived":
      status = params["response"]["status"]
      if status >= 400:
        failed.append(f"HTTP {status}: {params['response']['url']}")
    elif method == "Network.loadingFailed" and not params.get("canceled"):
      url = urls.get(params["requestId"], params["requestId"])
      failed.append(f"{params.get('errorText', 'failed')}: {url}")
  return failed


_BROKEN_IMAGES = """
return Array.from(document.images)
  .filter(img => img.complete && img.naturalWidth === 0 && img.getAttribute('src'))
  .map(img => img.getAttribute('src'));
"""


def _load(driver, url: str, timeout: float = 30) -> None:
  driver.get(url)
  deadline = time.monotonic() + timeout
  ready = (
    "return document.readyState === 'complete'"
    " && Array.from(document.images).every(i => i.complete)"
  )
  while not driver.execute_script(ready):
    if time.monotonic() > deadline:
      raise TimeoutError(url)
    time.sleep(0.1)


def check_pages(driver, base: str, site: pathlib.Path) -> list[str]:
  problems = []
  pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html"))
  _failed_requests(driver)  # clear the log
  for page in pages:
    rel = "" if page == "." else f"{page}/"
    _load(driver, base + rel)
    problems += [f"/{rel}: {f}" for f in _failed_requests(driver)]
    problems += [f"/{rel}: broken image {src}" for src in driver.execute_script(_BROKEN_IMAGES)]
  print(f"loaded {len(pages)} pages")
  return problems


def search(driver, base: str, query: str, timeout: float = 20) -> list[list[str]]:
  """The results the site's search box lists for ``query``: per page found, in order,
  the links of the result (the page, then its matching sections)."""
  from selenium.webdriver.common.by import By

  _load(driver, base)
  box = driver.find_element(By.CSS_SELECTOR, "input.md-search__input")
  if not box.is_displayed():  # a narrow window: the search is behind the header's button
    driver.find_element(By.CSS_SELECTOR, "label[for='__search']").click()
  box.click()
  box.send_keys(query)
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    items = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
    if items:
      time.sleep(0.5)  # let the worker's answer finish rendering
      items = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
      return [
        [a.get_attribute("href").removeprefix(base) for a in i.find_elements(By.TAG_NAME, "a")]
        for i in items
      ]
    time.sleep(0.2)
  return []


def _pages_with(site: pathlib.Path, word: str) -> set[str]:
  found = set()
  for page in site.rglob("index.html"):
    if word in page.read_text(encoding="utf-8"):
      rel = page.relative_to(site).parent.as_posix()
      found.add("" if rel == "." else f"{rel}/")
  return found


def check_search(driver, base: str, site: pathlib.Path) -> list[str]:
  problems = []
  for query, anchor in SEARCHES:
    items = search(driver, base, query)
    entries = [h for h in (items[0] if items else []) if "#" in h]
    first = entries[0] if entries else "nothing"
    print(f"search {query!r}: first {first} ({len(items)} pages)")
    if not first.endswith(f"#{anchor}"):
      problems.append(f"search {query!r}: first result {first}, not the entry #{anchor}")
  for query in FINDS:
    items = search(driver, base, query)
    found = {i[0].split("#")[0] for i in items if i}
    expected = _pages_with(site, query)
    print(f"search {query!r}: {len(found)} pages listed, {len(expected)} pages write it")
    if len(found) < min(len(expected), 10) or not found <= expected:
      missing = ", ".join(sorted(expected - found)) or "none"
      problems.append(f"search {query!r}: lists {sorted(found)}; pages not listed: {missing}")
  return problems


def screenshots(driver, base: str, out: pathlib.Path) -> None:
  out.mkdir(parents=True, exist_ok=True)
  driver.set_window_size(1400, 3000)
  for name, rel in SCREENSHOTS.items():
    _load(driver, base + rel)
    driver.save_screenshot(str(out / f"{name}.png"))
  print(f"screenshots of {len(SCREENSHOTS)} pages in {out}")


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("site", type=pathlib.Path)
  parser.add_argument("--screenshots", type=pathlib.Path)
  args = parser.parse_args(argv)
  if not (args.site / "index.html").is_file():
    print(f"{args.site}: no index.html; build the site first", file=sys.stderr)
    return 2
  with serve(args.site) as base, chromium() as driver:
    driver.set_window_size(1400, 1000)
    problems = check_pages(driver, base, args.site) + check_search(driver, base, args.site)
    if args.screenshots:
      screenshots(driver, base, args.screenshots)
  for p in problems:
    print(p)
  print(f"{len(problems)} problems")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
