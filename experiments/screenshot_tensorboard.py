"""Screenshots of TensorBoard's pages for a log directory, taken in headless Chromium: what a user
sees on opening TensorBoard, kept as PNGs to check a dashboard by eye.

    python -m experiments.screenshot_tensorboard runs/main [--out screenshots/main] [--port 6106]
        [--pages timeseries,hparams,custom_scalars,text] [--width 1600 --height 1300]

Starts ``tensorboard --logdir LOGDIR`` on 127.0.0.1, waits until it answers, takes one
screenshot per page (``<page>.png``; ``timeseries`` is the landing page) with Debian's
``chromium`` (``apt-get install chromium``), then stops TensorBoard. Nothing leaves the
machine: Chromium runs with a fresh profile and its background network features off.
Bad input prints one line ``experiments.screenshot_tensorboard: error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

PAGES = ("timeseries", "hparams", "custom_scalars", "text", "scalars", "images")
DEFAULT_PAGES = ("timeseries", "hparams", "custom_scalars", "text")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
)
START_TIMEOUT_S = 60.0
# Virtual time Chromium gives the page's scripts to fetch and draw before the screenshot.
RENDER_BUDGET_MS = 20_000


def chromium_binary() -> str:
    """The path of ``chromium`` (or ``chromium-browser``); ``ValueError`` saying how to install it."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise ValueError("chromium not found on PATH: install Debian's package (apt-get install chromium)")


def wait_until_serving(url: str, process: subprocess.Popen, timeout_s: float = START_TIMEOUT_S) -> None:
    """Poll ``url`` until TensorBoard answers; ``ValueError`` if it exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ValueError(f"tensorboard exited with status {process.returncode} before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise ValueError(f"tensorboard did not answer at {url} within {timeout_s:g} s")


def screenshot(chromium: str, url: str, path: Path, width: int, height: int) -> None:
    """One PNG of ``url`` at ``width`` x ``height`` pixels, in a throwaway Chromium profile."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--virtual-time-budget={RENDER_BUDGET_MS}", f"--screenshot={path}", url]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=180)
    if completed.returncode != 0 or not path.is_file():
        raise ValueError(f"chromium could not screenshot {url}: {completed.stderr.strip().splitlines()[-1:]}")


def take_screenshots(logdir: Path, out_dir: Path, pages: Sequence[str], port: int, width: int, height: int) -> list[Path]:
    """Serve ``logdir`` with TensorBoard and save ``out_dir/<page>.png`` for each page."""
    if not logdir.is_dir():
        raise ValueError(f"logdir {logdir} is not a folder: run the job that writes it first (e.g. make run)")
    unknown = [page for page in pages if page not in PAGES]
    if unknown or not pages:
        raise ValueError(f"pages {list(pages)}: each must be one of {list(PAGES)}")
    chromium = chromium_binary()
    out_dir.mkdir(parents=True, exist_ok=True)
    tensorboard = Path(sys.executable).with_name("tensorboard")
    command = [str(tensorboard) if tensorboard.is_file() else "tensorboard", "--logdir", str(logdir),
               "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "0"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_until_serving(base, server)
        saved = []
        for page in pages:
            path = out_dir / f"{page}.png"
            screenshot(chromium, f"{base}#{page}", path, width, height)
            saved.append(path)
        return saved
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; bad input prints one line and returns 2."""
    parser = argparse.ArgumentParser(prog="experiments.screenshot_tensorboard", description=__doc__.splitlines()[0])
    parser.add_argument("logdir", type=Path, help="what tensorboard --logdir gets, e.g. runs/main")
    parser.add_argument("--out", type=Path, help="folder for the PNGs (default screenshots/<logdir name>)")
    parser.add_argument("--pages", default=",".join(DEFAULT_PAGES), help=f"comma-separated, of {', '.join(PAGES)}")
    parser.add_argument("--port", type=int, default=6106)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1300)
    args = parser.parse_args(argv)
    try:
        out_dir = args.out or Path("screenshots") / args.logdir.name
        for path in take_screenshots(args.logdir, out_dir, [p for p in args.pages.split(",") if p], args.port,
                                     args.width, args.height):
            print(path)
    except ValueError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
