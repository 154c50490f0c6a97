"""The contact list's search and filters as a store filter."""

from pipelines.audience.contact_search import search_filter


def test_no_search_and_no_filters_is_no_condition():
    assert search_filter(None) is None
    assert search_filter("   ", bounced=False) is None


def test_every_word_must_match_one_of_the_three_fields():
    assert search_filter("ann  smith") == {"$and": [
        {"$or": [{f: {"$regex": "ann", "$options": "i"}} for f in ("email_key", "first_name", "last_name")]},
        {"$or": [{f: {"$regex": "smith", "$options": "i"}} for f in ("email_key", "first_name", "last_name")]},
    ]}


def test_words_are_literal_text_not_patterns():
    condition = search_filter("a.b+")
    assert condition["$or"][0]["email_key"]["$regex"] == r"a\.b\+"


def test_subscribed_filters_both_ways_and_bounced_only_when_true():
    assert search_filter(None, subscribed=False) == {"subscribed": False}
    assert search_filter(None, subscribed=True, bounced=True) == {"$and": [{"subscribed": True}, {"bounced": True}]}
    assert search_filter(None, bounced=False) is None
