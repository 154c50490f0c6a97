"""How many render processes a worker child gets when the operator did not say
(ops/worker_pool.with_render_default): none once the worker processes take every core."""

from __future__ import annotations

from ops.worker_pool import with_render_default


def test_worker_processes_that_fill_the_cores_render_in_a_thread():
    assert with_render_default({}, processes=2, cores=2)["POSTROOM_RENDER_PROCESSES"] == "0"
    assert with_render_default({}, processes=4, cores=2)["POSTROOM_RENDER_PROCESSES"] == "0"


def test_a_free_core_keeps_the_render_processes_default():
    assert "POSTROOM_RENDER_PROCESSES" not in with_render_default({}, processes=1, cores=2)
    assert "POSTROOM_RENDER_PROCESSES" not in with_render_default({}, processes=2, cores=8)


def test_what_the_operator_set_stands():
    env = {"POSTROOM_RENDER_PROCESSES": "3"}
    assert with_render_default(env, processes=2, cores=2) == env
