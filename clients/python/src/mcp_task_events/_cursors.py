"""Cursor stores: where the last processed seq of each task is kept."""

from __future__ import annotations

import inspect
import itertools
import json
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio

MAX_SEQ = 2**53 - 1
MAX_FILE_TASK_ID_BYTES = 100
_temp_counter = itertools.count()


@runtime_checkable
class CursorStore(Protocol):
    """The cursors of tasks. ``save`` is called only after the host's handler returned for the
    event ``seq``. Either method may be a coroutine function."""

    def load(self, task_id: str) -> int | None: ...

    def save(self, task_id: str, seq: int) -> None: ...


async def load_cursor(store: CursorStore, task_id: str) -> int | None:
    value = store.load(task_id)
    if inspect.isawaitable(value):
        value = await value
    return value


async def save_cursor(store: CursorStore, task_id: str, seq: int) -> None:
    value = store.save(task_id, seq)
    if inspect.isawaitable(value):
        await value


class MemoryCursorStore:
    """Cursors in memory, for a host that follows tasks within one process lifetime."""

    def __init__(self) -> None:
        self._cursors: dict[str, int] = {}

    def load(self, task_id: str) -> int | None:
        return self._cursors.get(task_id)

    def save(self, task_id: str, seq: int) -> None:
        self._cursors[task_id] = seq

    def delete(self, task_id: str) -> None:
        self._cursors.pop(task_id, None)


class FileCursorStore:
    """Cursors in a directory, one small JSON file per task (``{"taskId": ..., "seq": N}``,
    named by the task id in hex), each replaced atomically and durably on save: written to a
    temporary file, synced, renamed over the old one, the directory synced. The same files as
    the Rust client's ``FileCursorStore``."""

    def __init__(self, directory: str | os.PathLike[str], *, sync: bool = True) -> None:
        self.directory = Path(directory)
        self._sync = sync

    def path_of(self, task_id: str) -> Path:
        raw = task_id.encode()
        if not raw or len(raw) > MAX_FILE_TASK_ID_BYTES:
            raise ValueError(f"task id {task_id[:40]!r} cannot name a cursor file")
        return self.directory / f"{raw.hex()}.cursor"

    async def load(self, task_id: str) -> int | None:
        return await anyio.to_thread.run_sync(self._load, task_id)

    async def save(self, task_id: str, seq: int) -> None:
        await anyio.to_thread.run_sync(self._save, task_id, seq)

    def _load(self, task_id: str) -> int | None:
        path = self.path_of(task_id)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            value = json.loads(text)
        except ValueError as e:
            raise ValueError(f"cursor file {path} is corrupt: {e}") from e
        seq = value.get("seq") if isinstance(value, dict) else None
        if value.get("taskId") != task_id or type(seq) is not int or not 0 <= seq <= MAX_SEQ:
            raise ValueError(f"cursor file {path} is corrupt: {text[:100]!r}")
        return seq

    def _save(self, task_id: str, seq: int) -> None:
        if not 0 <= seq <= MAX_SEQ:
            raise ValueError(f"seq {seq} is not a seq")
        path = self.path_of(task_id)
        self.directory.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{next(_temp_counter)}")
        body = json.dumps({"taskId": task_id, "seq": seq}).encode() + b"\n"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, body)
                if self._sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if self._sync:
            dfd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
