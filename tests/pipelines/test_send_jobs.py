"""Send jobs are cut by count and by bytes; a message larger than the bound goes alone."""

from pipelines.send_jobs import chunks, job_bytes


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
