"""A worker imports its pool's ``preload`` modules before it reports ready, even when the (one, per-process) fork
server was started by another pool that preloaded other modules -- so their import time never counts against an
item's timeout (the math verifier's sympy import once did, after a TimedVerifier had started the fork server)."""

import sys

from reinforce_ada.verifiers.pool import WorkerPool


def is_imported(name: str) -> bool:
    return name in sys.modules


def test_preload_modules_are_imported_before_the_first_item_even_on_a_running_fork_server():
    first = WorkerPool(abs, num_workers=1, timeout=60.0)  # starts the fork server (if nobody has yet) without tabnanny
    assert [o.value for o in first.map([(-3,)])] == [3]
    plain = WorkerPool(is_imported, num_workers=1, timeout=60.0)
    assert [o.value for o in plain.map([("tabnanny",)])] == [False]
    preloading = WorkerPool(is_imported, num_workers=1, timeout=60.0, preload=["tabnanny"])
    assert [o.value for o in preloading.map([("tabnanny",)])] == [True]
    for pool in (first, plain, preloading):
        pool.close()
