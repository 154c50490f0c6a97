"""The export's formula guard (pipelines.audience.contact_csv): what is escaped, and that an import
takes exactly that escape off again."""

import pytest

from pipelines.audience.contact_csv import neutralised, unneutralised


@pytest.mark.parametrize("value, cell", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("\r=1", "'\r=1"), ("'=x", "''=x"), ("''+x", "'''+x"),
    ("-5", "-5"), ("-1.5", "-1.5"), ("'hello", "'hello"), ("hello", "hello"), ("", ""), ("a=b", "a=b"),
])
def test_formula_cells_get_a_quote_and_lose_exactly_it_on_import(value, cell):
    assert neutralised(value) == cell
    assert unneutralised(cell) == value
