"""Templates over real HTTP: CRUD, search, versions, restore, soft delete, rendering."""

import pytest

from tests.support.api import assert_error

HTML = "<p>Hello {{firstName|there}}</p>"
STRUCTURE = {"blocks": [{"id": "h1", "type": "header", "content": {"text": "Hi {{firstName}}", "level": 1}},
                        {"id": "b1", "type": "button", "content": {"text": "Go", "url": "https://acme.example"}}],
             "settings": {"contentWidth": 600, "backgroundColor": "#f0f0f0"}}


def create(tenant, **fields):
    body = {k: v for k, v in {"name": "Welcome", "html": HTML, **fields}.items() if v is not None}
    response = tenant.post("/templates", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def test_a_created_template_reads_back_with_html_structure_and_version_one(tenant):
    made = create(tenant, description="First mail", json_structure=STRUCTURE)
    assert made["version"] == 1 and made["name"] == "Welcome" and made["description"] == "First mail"
    got = tenant.get(f"/templates/{made['id']}").json()["data"]
    assert got["html"] == HTML and got["json_structure"] == STRUCTURE
    assert got["created_at"] == got["updated_at"] == made["created_at"]


def test_html_is_rendered_from_json_structure_when_omitted(tenant):
    made = create(tenant, html=None, json_structure=STRUCTURE)
    assert "<table" in made["html"] and "Hi {{firstName}}" in made["html"] and 'bgcolor="#f0f0f0"' in made["html"]


def test_render_endpoint_returns_html_without_storing_anything(tenant):
    response = tenant.post("/templates/render", json={"json_structure": STRUCTURE})
    assert response.status_code == 200, response.text
    assert 'href="https://acme.example"' in response.json()["data"]["html"]
    assert tenant.get("/templates").json()["pagination"]["total"] == 0


@pytest.mark.parametrize("body, path", [
    ({"html": HTML}, "name"),
    ({"name": "x"}, "html"),
    ({"name": "", "html": HTML}, "name"),
    ({"name": "x" * 201, "html": HTML}, "name"),
    ({"name": 5, "html": HTML}, "name"),
    ({"name": "x", "html": ["<p>"]}, "html"),
    ({"name": "x", "html": HTML, "description": "d" * 2001}, "description"),
    ({"name": "x", "html": HTML, "json_structure": []}, "json_structure"),
    ({"name": "x", "html": HTML,
      "json_structure": {"blocks": [{"id": "a", "type": "header", "content": {"level": 9}}]}},
     "json_structure.blocks[0].content.level"),
    ({"name": "x", "html": HTML, "colour": "red"}, "colour"),
    ({"name": "x", "html": "x" * (256 * 1024 + 1)}, "html"),
])
def test_invalid_creates_are_refused_with_the_offending_path(tenant, body, path):
    assert_error(tenant.post("/templates", json=body), 400, "validation_error", path)


def test_malformed_merge_tags_are_refused_at_save_with_line_and_column(tenant):
    error = assert_error(tenant.post("/templates", json={"name": "x", "html": "<p>\n  {{#if vip}}yes</p>"}),
                         400, "validation_error", "html")
    assert "line 2, column 3" in error["message"] and "never closed" in error["message"]
    made = create(tenant)
    error = assert_error(tenant.patch(f"/templates/{made['id']}", json={"html": "{{name||loud}}"}),
                         400, "validation_error", "html")
    assert "unknown format" in error["message"]


def test_a_malformed_tag_in_a_block_is_reported_at_that_block_field(tenant):
    broken = {"blocks": [STRUCTURE["blocks"][0],
                         {"id": "t1", "type": "text", "content": {"html": "<p>Dear {{#if vip}}VIP</p>"}}]}
    for call in (lambda: tenant.post("/templates", json={"name": "x", "json_structure": broken}),
                 lambda: tenant.post("/templates/render", json={"json_structure": broken})):
        error = assert_error(call(), 400, "validation_error", "json_structure.blocks[1].content.html")
        assert "line 1, column 9" in error["message"] and "never closed" in error["message"]


def test_blocks_nested_deeper_than_400_are_refused_at_save_and_400_are_kept(tenant):
    deep = "<p>" + "{{#each a}}" * 401 + "x" + "{{/each}}" * 401 + "</p>"
    error = assert_error(tenant.post("/templates", json={"name": "x", "html": deep}), 400, "validation_error", "html")
    assert "nest more than 400 levels deep" in error["message"] and "line 1, column 4404" in error["message"]
    made = create(tenant, html="{{#each a}}" * 400 + "x" + "{{/each}}" * 400)
    assert_error(tenant.patch(f"/templates/{made['id']}", json={"html": deep}), 400, "validation_error", "html")
    in_block = {"blocks": [{"id": "t1", "type": "text", "content": {"html": deep}}]}
    assert_error(tenant.post("/templates", json={"name": "x", "json_structure": in_block}), 400, "validation_error",
                 "json_structure.blocks[0].content.html")
    assert tenant.get(f"/templates/{made['id']}").json()["data"]["version"] == 1


def test_malformed_json_and_wrong_content_type_are_validation_errors(tenant):
    assert_error(tenant.post("/templates", content=b"{nope", headers={"Content-Type": "application/json"}),
                 400, "validation_error")
    assert_error(tenant.post("/templates", content=b"name=x", headers={"Content-Type": "text/plain"}),
                 400, "validation_error")


def test_list_searches_names_case_insensitively_and_paginates(tenant):
    for name in ("Welcome A", "welcome b", "Receipt", "Welcome (c)*"):
        create(tenant, name=name)
    everything = tenant.get("/templates").json()
    assert everything["pagination"] == {"total": 4, "limit": 100, "offset": 0, "has_more": False}
    assert "html" not in everything["data"][0]
    found = tenant.get("/templates", params={"search": "WELCOME", "limit": 2}).json()
    assert found["pagination"] == {"total": 3, "limit": 2, "offset": 0, "has_more": True}
    rest = tenant.get("/templates", params={"search": "welcome", "limit": 2, "offset": 2}).json()
    assert len(rest["data"]) == 1 and rest["pagination"]["has_more"] is False
    names = {t["name"] for t in found["data"] + rest["data"]}
    assert names == {"Welcome A", "welcome b", "Welcome (c)*"}
    assert [t["name"] for t in tenant.get("/templates", params={"search": "(c)*"}).json()["data"]] == ["Welcome (c)*"]
    assert_error(tenant.get("/templates", params={"limit": 0}), 400, "validation_error", "limit")
    assert_error(tenant.get("/templates", params={"offset": -1}), 400, "validation_error", "offset")


def test_version_history_round_trip_with_restore(tenant):
    made = create(tenant, description="v1 text", json_structure=STRUCTURE)
    tid = made["id"]
    second = tenant.patch(f"/templates/{tid}", json={"html": "<p>v2 {{email}}</p>"}).json()["data"]
    assert second["version"] == 2 and second["name"] == "Welcome" and second["description"] == "v1 text"
    assert second["json_structure"] == STRUCTURE
    third = tenant.patch(f"/templates/{tid}", json={"name": "Renamed", "description": None}).json()["data"]
    assert third["version"] == 3 and third["html"] == "<p>v2 {{email}}</p>" and third["description"] is None

    history = tenant.get(f"/templates/{tid}/versions").json()
    assert [v["version"] for v in history["data"]] == [3, 2, 1]
    assert history["pagination"]["total"] == 3 and "html" not in history["data"][0]
    assert [v["version"] for v in tenant.get(f"/templates/{tid}/versions", params={"limit": 1, "offset": 1})
            .json()["data"]] == [2]
    first = tenant.get(f"/templates/{tid}/versions/1").json()["data"]
    assert first["html"] == HTML and first["name"] == "Welcome" and first["json_structure"] == STRUCTURE

    restored = tenant.post(f"/templates/{tid}/versions/1/restore").json()["data"]
    assert restored["version"] == 4 and restored["html"] == HTML and restored["name"] == "Welcome"
    assert restored["description"] == "v1 text"
    latest = tenant.get(f"/templates/{tid}/versions/4").json()["data"]
    assert latest["restored_from"] == 1
    assert tenant.get(f"/templates/{tid}").json()["data"]["version"] == 4
    assert_error(tenant.get(f"/templates/{tid}/versions/9"), 404, "not_found")
    assert_error(tenant.post(f"/templates/{tid}/versions/9/restore"), 404, "not_found")


def test_patch_with_only_json_structure_keeps_the_clients_html(tenant):
    made = create(tenant)
    response = tenant.patch(f"/templates/{made['id']}", json={"json_structure": STRUCTURE})
    assert response.status_code == 200, response.text
    patched = response.json()["data"]
    assert patched["version"] == 2 and patched["json_structure"] == STRUCTURE
    assert patched["html"] == HTML
    assert tenant.get(f"/templates/{made['id']}").json()["data"]["html"] == HTML


def test_patch_with_render_html_renders_html_from_the_given_or_the_stored_structure(tenant):
    made = create(tenant)
    given = tenant.patch(f"/templates/{made['id']}", json={"json_structure": STRUCTURE, "render_html": True})
    assert given.status_code == 200, given.text
    assert "<table" in given.json()["data"]["html"] and "Hi {{firstName}}" in given.json()["data"]["html"]

    own = tenant.patch(f"/templates/{made['id']}", json={"html": HTML}).json()["data"]
    assert own["html"] == HTML and own["json_structure"] == STRUCTURE
    stored = tenant.patch(f"/templates/{made['id']}", json={"render_html": True}).json()["data"]
    assert stored["version"] == 4 and stored["html"] == given.json()["data"]["html"]


@pytest.mark.parametrize("body", [{"html": HTML, "render_html": True}, {"render_html": True}])
def test_render_html_needs_a_structure_and_no_html(tenant, body):
    made = create(tenant)  # no json_structure stored
    assert_error(tenant.patch(f"/templates/{made['id']}", json=body), 400, "validation_error", "render_html")
    assert tenant.get(f"/templates/{made['id']}").json()["data"]["version"] == 1


@pytest.mark.parametrize("body, path", [
    ({}, None), ({"name": None}, "name"), ({"html": None}, "html"), ({"name": ""}, "name"),
    ({"json_structure": {"blocks": "x"}}, "json_structure.blocks"), ({"version": 3}, "version")])
def test_invalid_patches_are_refused(tenant, body, path):
    made = create(tenant)
    assert_error(tenant.patch(f"/templates/{made['id']}", json=body), 400, "validation_error", path)
    assert tenant.get(f"/templates/{made['id']}").json()["data"]["version"] == 1


def test_a_deleted_template_is_gone_everywhere(tenant):
    made = create(tenant)
    tid = made["id"]
    response = tenant.delete(f"/templates/{tid}")
    assert response.status_code == 200 and response.json()["data"] == {"id": tid, "deleted": True}
    for call in (lambda: tenant.get(f"/templates/{tid}"), lambda: tenant.patch(f"/templates/{tid}", json={"name": "x"}),
                 lambda: tenant.delete(f"/templates/{tid}"), lambda: tenant.get(f"/templates/{tid}/versions"),
                 lambda: tenant.get(f"/templates/{tid}/versions/1"),
                 lambda: tenant.post(f"/templates/{tid}/versions/1/restore")):
        assert_error(call(), 404, "not_found")
    assert tenant.get("/templates").json()["pagination"]["total"] == 0


def test_another_workspaces_template_answers_404(service, tenant):
    made = create(tenant)
    other = service.tenant()
    for call in (lambda: other.get(f"/templates/{made['id']}"),
                 lambda: other.patch(f"/templates/{made['id']}", json={"name": "stolen"}),
                 lambda: other.delete(f"/templates/{made['id']}"),
                 lambda: other.get(f"/templates/{made['id']}/versions"),
                 lambda: other.post(f"/templates/{made['id']}/versions/1/restore")):
        assert_error(call(), 404, "not_found")
    assert other.get("/templates").json()["data"] == []
    assert tenant.get(f"/templates/{made['id']}").json()["data"]["name"] == "Welcome"


def test_unknown_ids_answer_404(tenant):
    assert_error(tenant.get("/templates/00000000-0000-0000-0000-000000000000"), 404, "not_found")
    assert_error(tenant.patch("/templates/nope", json={"name": "x"}), 404, "not_found")


def test_read_only_keys_can_list_but_not_write(service, tenant):
    reader = service.extra_key(tenant, permissions=["templates:read"])
    assert reader.get("/templates").status_code == 200
    assert_error(reader.post("/templates", json={"name": "x", "html": HTML}), 403, "forbidden")
