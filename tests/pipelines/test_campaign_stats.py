from pipelines.campaigns import fanout as campaign_fanout
from pipelines.campaigns import stats as campaign_stats


def test_stats_count_every_message_that_got_at_least_that_far():
    campaign = {"total_recipients": 10,
                "status_counts": {"delivered": 4, "opened": 2, "clicked": 1, "bounced": 1, "sending": 1,
                                  "queued": 1},
                "opened_unique": 3, "opens_total": 7, "clicked_unique": 1, "clicks_total": 2,
                "unsubscribed": 1, "complained": 0}
    stats = campaign_stats.stats(campaign)
    assert stats["sent"] == 8
    assert stats["delivered"] == 7
    assert stats["bounced"] == 1
    assert stats["pending"] == 2
    assert (stats["opened"], stats["opens_total"], stats["clicked"], stats["clicks_total"]) == (3, 7, 1, 2)
    rates = campaign_stats.rates(stats)
    assert rates["delivery_rate"] == 0.875
    assert rates["bounce_rate"] == 0.125
    assert rates["open_rate"] == round(3 / 7, 4)
    assert rates["click_rate"] == round(1 / 7, 4)
    assert rates["unsubscribe_rate"] == round(1 / 7, 4)


def test_rates_of_a_campaign_that_sent_nothing_are_zero_not_an_error():
    rates = campaign_stats.rates(campaign_stats.stats({}))
    assert set(rates.values()) == {0.0}


def test_a_recipient_message_id_is_the_same_on_every_run_and_differs_per_campaign():
    a = campaign_fanout.message_id("camp-1", "contact-1")
    assert a == campaign_fanout.message_id("camp-1", "contact-1")
    assert a != campaign_fanout.message_id("camp-2", "contact-1")
    assert a.startswith("msg_") and len(a) == 36


def test_batches_are_the_recipients_divided_by_the_batch_size_rounded_up():
    assert campaign_fanout.batch_count(0) == 0
    assert campaign_fanout.batch_count(1) == 1
    assert campaign_fanout.batch_count(campaign_fanout.BATCH_SIZE) == 1
    assert campaign_fanout.batch_count(campaign_fanout.BATCH_SIZE + 1) == 2
