"""Send jobs are cut by count and by bytes; a message larger than the bound goes alone."""

from pipelines.messages.send_jobs import chunks, job_bytes


def rendered(i: int, size: int) -> dict:
    return {"_id": f"m{i}", "mail_from": "b@x", "recipients": ["r@example.org"], "data": "x" * size}


def test_jobs_stay_under_the_byte_bound_and_keep_the_order():
    items = [rendered(i, 200_000) for i in range(150)]
    jobs = list(chunks(items, max_bytes=4 * 1024 * 1024))
    assert [m["_id"] for job in jobs for m in job] == [m["_id"] for m in items]
    assert all(sum(job_bytes(m) for m in job) <= 4 * 1024 * 1024 for job in jobs)
    assert [len(job) for job in jobs][:2] == [20, 20]


def test_small_messages_are_bounded_by_count():
    assert [len(job) for job in chunks([rendered(i, 100) for i in range(250)], max_bytes=10**9)] == [100, 100, 50]


def test_a_message_larger_than_the_bound_travels_alone():
    items = [rendered(0, 10), rendered(1, 5_000), rendered(2, 10)]
    assert [[m["_id"] for m in job] for job in chunks(items, max_bytes=1_000)] == [["m0"], ["m1"], ["m2"]]


def test_the_counted_size_of_a_message_is_its_json_size():
    """The size is counted without encoding the MIME: it must still be what Dramatiq's JSON
    carries (or more), for every kind of text a message can hold."""
    import json
    texts = ["plain ASCII\r\nwith \"quotes\", back\\slashes\tand tabs\r\n", "Grüße \u2603 \U0001F600",
             "control \x01\x1f\x0b chars", "", "=3D\r\n" * 50]
    for text in texts:
        item = {**rendered(0, 0), "data": text}
        encoded = len(json.dumps(item)) + 2   # the item and the separator before the next
        assert job_bytes(item) >= encoded
        if text.isascii() and not any(ord(c) < 32 and c not in "\r\n\t" for c in text):
            assert job_bytes(item) == encoded   # counted without encoding, to the byte
