"""The export's formula guard (pipelines.audience.contact_csv): what is escaped, and that an import
takes exactly that escape off again."""

import pytest

from pipelines.audience.contact_csv import neutralised, typed, unneutralised


@pytest.mark.parametrize("value, cell", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("\r=1", "'\r=1"), ("'=x", "''=x"), ("''+x", "'''+x"),
    ("-5", "-5"), ("-1.5", "-1.5"), ("'hello", "'hello"), ("hello", "hello"), ("", ""), ("a=b", "a=b"),
])
def test_formula_cells_get_a_quote_and_lose_exactly_it_on_import(value, cell):
    assert neutralised(value) == cell
    assert unneutralised(cell) == value


@pytest.mark.parametrize("declared, cell, said", [("integer", "forty", "'forty' is not an integer"),
                                                  ("number", "1,5", "'1,5' is not a number"),
                                                  ("boolean", "maybe", "'maybe' is not a boolean")])
def test_a_cell_of_the_wrong_type_is_named_in_plain_english(declared, cell, said):
    with pytest.raises(ValueError) as refused:
        typed(cell, declared)
    assert str(refused.value) == said
