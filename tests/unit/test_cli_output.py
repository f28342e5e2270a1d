"""The one JSON shape of a list: `json_array` prints what `emit_json` prints for the same list,
an item at a time, and what it printed parses even when the command stops part-way."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import output

RECEIPTS = [{"line": 1, "outcome": "written"}, {"line": 2, "outcome": "unchanged", "note": "é"}]


def test_an_array_printed_an_item_at_a_time_is_the_array_emit_json_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output.emit_json(RECEIPTS)
    whole = capsys.readouterr().out
    with output.json_array() as add:
        for receipt in RECEIPTS:
            add(receipt)

    assert capsys.readouterr().out == whole
    assert json.loads(whole) == RECEIPTS


def test_an_empty_array_is_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    with output.json_array():
        pass

    assert capsys.readouterr().out == "[]\n"


def test_an_array_cut_short_by_a_failure_still_parses(capsys: pytest.CaptureFixture[str]) -> None:
    def import_until_the_store_goes_away() -> None:
        with output.json_array() as add:
            add(RECEIPTS[0])
            raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        import_until_the_store_goes_away()

    assert json.loads(capsys.readouterr().out) == RECEIPTS[:1]
