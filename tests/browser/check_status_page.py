"""The live status page of `taskstream serve --http` in headless Chromium (Selenium driving
Debian's chromium through chromedriver).

The browser reaches the server through a small TCP relay in this script, so that the test can
cut the page's connections from the server's side (the relay closes both ends of every
connection it carries, the server's socket among them). The checks:

1. the overview lists a running `emit` task and, once the page follows it, one stream
   following it;
2. the page's timeline (the page's own `tasks/stream` over Streamable HTTP) shows the task's
   events in seq order while it runs;
3. with the task still running, every connection is cut; the page resumes with `after` and the
   timeline ends complete with every seq from 0 to count + 1 exactly once: no gap, no
   duplicate;
4. a screenshot of the page is saved (ARTIFACTS, default target/browser/status-page.png).

Every wait is on a condition with a bounded timeout. Environment: TASKSTREAM_BIN (required),
CHROMIUM (default /usr/bin/chromium), CHROMEDRIVER (default /usr/bin/chromedriver), ARTIFACTS.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import (NoSuchElementException, StaleElementReferenceException,
                                        TimeoutException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

MODERN = "2026-07-28"
COUNT = 120          # events of the emit task (it has COUNT + 2 in all)
INTERVAL_MS = 100    # so it runs about 12 s: long enough to cut it part way
CUT_AFTER = 15       # events shown before the cut

results = []


def check(ok: bool, name: str, detail: str = "") -> None:
    results.append((ok, name))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}",
          flush=True)
    if not ok:
        raise SystemExit(finish())


def finish() -> int:
    passed = sum(1 for ok, _ in results if ok)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


class Relay:
    """A TCP relay on 127.0.0.1: every connection accepted is carried to `upstream`; `cut`
    closes both sides of every connection carried so far."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = None
        self.lock = threading.Lock()
        self.pairs = []
        self.cuts = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    @staticmethod
    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self.lock:
            pairs, self.pairs = self.pairs, []
            self.cuts += 1
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


def rpc(url: str, rid: int, method: str, params: dict) -> dict:
    params = dict(params)
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-method": method}
    name = params.get("name") or params.get("taskId")
    if name:
        headers["mcp-name"] = name
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
    req = urllib.request.Request(f"{url}/mcp", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())


def timeline(driver) -> dict:
    section = driver.find_element(By.ID, "timeline-section")
    seqs = section.get_attribute("data-seqs") or ""
    return {
        "state": section.get_attribute("data-state"),
        "seqs": [int(s) for s in seqs.split(",") if s],
        "resumes": int(section.get_attribute("data-resumes") or 0),
        "duplicates": int(section.get_attribute("data-duplicates") or 0),
        "gaps": int(section.get_attribute("data-gaps") or 0),
    }


def wait_for(driver, what: str, cond, timeout: float):
    """Waits until `cond(driver)` is truthy. An element found while the page replaces it (the
    overview's rows are rebuilt on every poll) is stale, and counts as "not yet", not as a
    failure; any other error fails the check at once, with the error in its detail."""
    try:
        got = WebDriverWait(driver, timeout, poll_frequency=0.05,
                            ignored_exceptions=(NoSuchElementException,
                                                StaleElementReferenceException)).until(
            lambda d: cond(d))
    except TimeoutException:
        check(False, what, f"not within {timeout} s; timeline {timeline_or_none(driver)}; "
              f"overview {overview_or_none(driver)}")
    except Exception as e:  # noqa: BLE001 - a page or driver error is the failure reported
        check(False, what, f"{type(e).__name__}: {e}; timeline {timeline_or_none(driver)}")
    check(True, what)
    return got


def overview_or_none(driver):
    """The page's summary line and its task rows as text, for a failure's detail."""
    try:
        rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#tasks tr")]
        return {"summary": driver.find_element(By.ID, "summary").text, "rows": rows}
    except Exception:  # noqa: BLE001
        return None


def timeline_or_none(driver):
    try:
        return timeline(driver)
    except Exception:  # noqa: BLE001
        return None


def main() -> int:
    binary = os.environ.get("TASKSTREAM_BIN")
    if not binary:
        print("TASKSTREAM_BIN is not set")
        return 2
    artifacts = os.environ.get("ARTIFACTS", "target/browser")
    os.makedirs(artifacts, exist_ok=True)
    relay = Relay()
    page_origin = f"http://127.0.0.1:{relay.port}"
    with tempfile.TemporaryDirectory() as tmp:
        err = open(os.path.join(tmp, "server.log"), "w+")
        proc = subprocess.Popen(
            [binary, "serve", "--in-memory", "--http", "127.0.0.1:0",
             "--allowed-origin", page_origin],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        driver = None
        try:
            url = None
            assert proc.stderr is not None
            for line in proc.stderr:  # the address comes first; a dead server ends the loop
                err.write(line)
                m = re.search(r"listening on http://(127\.0\.0\.1):(\d+)/mcp", line)
                if m:
                    url = f"http://{m.group(1)}:{m.group(2)}"
                    relay.upstream = (m.group(1), int(m.group(2)))
                    break
            check(url is not None, "the server started")
            threading.Thread(target=lambda: [err.write(l) for l in proc.stderr],
                             daemon=True).start()

            created = rpc(url, 1, "tools/call", {
                "name": "emit", "arguments": {"count": COUNT, "interval_ms": INTERVAL_MS}})
            task = created["result"]["taskId"]

            options = webdriver.ChromeOptions()
            options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
            for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                        "--disable-gpu", "--window-size=1280,1000", "--no-first-run",
                        "--disable-extensions", "--disable-background-networking"):
                options.add_argument(arg)
            service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
            driver = webdriver.Chrome(options=options, service=service)
            driver.set_page_load_timeout(30)
            driver.get(f"{page_origin}/#task={task}")

            wait_for(driver, "the overview lists the task",
                     lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-task="{task}"]'), 20)
            wait_for(driver, f"the timeline shows the first {CUT_AFTER} events",
                     lambda d: len(timeline(d)["seqs"]) >= CUT_AFTER, 30)
            wait_for(driver, "the overview shows one stream following the task",
                     lambda d: d.find_element(By.CSS_SELECTOR, f'tr[data-task="{task}"]')
                     .get_attribute("data-streams") == "1", 20)
            before = timeline(driver)
            check(before["seqs"] == list(range(len(before["seqs"]))),
                  "the events arrive in seq order from 0", str(before["seqs"]))
            status = rpc(url, 2, "tasks/get", {"taskId": task})["result"]["status"]
            check(status == "working", "the task is still running at the cut", status)

            relay.cut()
            wait_for(driver, "the page sees the cut and resumes",
                     lambda d: timeline(d)["resumes"] >= 1, 20)
            resumed_at = timeline(driver)["seqs"][-1] if timeline(driver)["seqs"] else 0
            wait_for(driver, "the timeline goes on after the resume",
                     lambda d: len(timeline(d)["seqs"]) >= resumed_at + 8, 30)
            path = os.path.join(artifacts, "status-page-resumed.png")
            check(driver.save_screenshot(path) and os.path.getsize(path) > 0,
                  f"screenshot of the resumed timeline saved ({path})")
            wait_for(driver, "the timeline ends complete",
                     lambda d: timeline(d)["state"] == "complete", 60)
            after = timeline(driver)
            want = list(range(COUNT + 2))
            check(after["seqs"] == want, "every seq from 0 to count + 1 exactly once, in order",
                  f"{after['seqs']}")
            check(after["duplicates"] == 0 and after["gaps"] == 0,
                  "no duplicate and no gap across the resume", str(after))
            shown = [int(li.get_attribute("data-seq"))
                     for li in driver.find_elements(By.CSS_SELECTOR, "#timeline li[data-seq]")]
            check(shown == want, "the timeline on the page lists the same seqs", str(shown))
            wait_for(driver, "the overview shows the task completed",
                     lambda d: "completed" in d.find_element(
                         By.CSS_SELECTOR, f'tr[data-task="{task}"]').text, 20)
            path = os.path.join(artifacts, "status-page.png")
            check(driver.save_screenshot(path) and os.path.getsize(path) > 0,
                  f"screenshot saved ({path})")
            print(f"resumed {after['resumes']} time(s) after the cut at seq {before['seqs'][-1]}")
        finally:
            if driver is not None:
                driver.quit()
            relay.close()
            proc.kill()
            proc.wait()
            if any(not ok for ok, _ in results):
                err.seek(0)
                print("--- server log\n" + err.read()[-4000:])
    return finish()


if __name__ == "__main__":
    sys.exit(main())
