"""tests/front talk to the front's app in the test process (the fast tier) on the session's
real store; a module marked `e2e` as a whole talks to the real `postroom front` instead.
A single test marked `e2e` keeps the app in process and gets the session's processes too
(tests/conftest.py), for the worker's mail and the real front's links."""

import pytest


@pytest.fixture(scope="module")
def service(request):
    if request.node.get_closest_marker("e2e"):
        return request.getfixturevalue("live_service")
    return request.getfixturevalue("front_in_process")
