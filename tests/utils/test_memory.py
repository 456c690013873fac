"""Tests of `sbert_keras.utils.memory`: freed heap pages handed back to the system."""

import ctypes.util
import os

import pytest

from sbert_keras.utils import memory

BLOCK = 64 * 1024  # below glibc's mmap threshold: from the heap, kept mapped when freed


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def glibc():
    return os.path.exists("/proc/self/statm") and "libc.so.6" in (ctypes.util.find_library("c") or "")


@pytest.mark.skipif(not glibc(), reason="malloc_trim is glibc's (Linux)")
def test_freed_heap_blocks_go_back_to_the_system():
    blocks = [bytearray(BLOCK) for _ in range(3200)]  # 200 MiB, touched (zero-filled)
    keep = bytearray(BLOCK)  # above the rest on the heap: glibc cannot shrink the heap's top past it
    del blocks
    before = resident_bytes()
    assert memory.release_freed() is True
    assert before - resident_bytes() > 100 * 2**20
    assert len(keep) == BLOCK


def test_without_malloc_trim_it_does_nothing(monkeypatch):
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    try:
        assert memory.release_freed() is False
    finally:
        memory._malloc_trim.cache_clear()
