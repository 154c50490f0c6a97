"""Helpers the automation tests share: build an automation over HTTP, trigger it, read its runs."""

from __future__ import annotations

from tests.support.polling import wait_until


def make_automation(tenant, steps, *, trigger_type="api", trigger_config=None, name="Flow", active=True):
    body = {"name": name, "trigger_type": trigger_type, "steps": steps}
    if trigger_config is not None:
        body["trigger_config"] = trigger_config
    response = tenant.post("/automations", json=body)
    assert response.status_code == 201, response.text
    automation = response.json()["data"]
    if active:
        response = tenant.patch(f"/automations/{automation['id']}", json={"status": "active"})
        assert response.status_code == 200, response.text
        automation = response.json()["data"]
    return automation


def trigger(tenant, automation_id, contact, **data):
    body = {"contact_id": contact["id"]}
    if data:
        body["trigger_data"] = data
    response = tenant.post(f"/automations/{automation_id}/trigger", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def runs(tenant, automation_id, status=None):
    query = f"?status={status}&limit=1000" if status else "?limit=1000"
    response = tenant.get(f"/automations/{automation_id}/runs{query}")
    assert response.status_code == 200, response.text
    return response.json()["data"]


def run_of(tenant, automation_id, run_id):
    return next(r for r in runs(tenant, automation_id) if r["id"] == run_id)


def wait_run(tenant, automation_id, run_id, status="completed", timeout=30.0, where=None):
    """The run once its status is `status` (and `where(run)` holds, when given)."""
    def reached():
        run = run_of(tenant, automation_id, run_id)
        return run if run["status"] == status and (where is None or where(run)) else None
    return wait_until(reached, timeout=timeout, what=f"run {run_id} {status}", interval=0.1)


def outcomes(run):
    """(step id, outcome) of the run's history, in order."""
    return [(e["step_id"], e["outcome"]) for e in run["history"]]
