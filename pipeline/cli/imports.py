"""`sgam import`: many `put` commands from a JSON Lines file, checked first, written in chunks.

Exit codes (the table of `pipeline.cli.errors`): 0 when every line was written or unchanged;
2 when a line is invalid (nothing written, unless --skip-invalid); else 3 when the ledger
refused a line (conflict, rejected, version_conflict), as `sgam put` does. An invalid line
ranks before a refusal: the file needs fixing first.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.cli import output
from pipeline.cli.errors import exit_code
from pipeline.cli.lines import each_object, report_lines
from pipeline.cli.options import json_output, opened_store
from pipeline.cli.progress import progress

if TYPE_CHECKING:
    from pipeline.db.store import Store
    from pipeline.ledger.imports import ImportReceipt
    from schemas.commands import PutFact

ValidLines = list[tuple[int, "PutFact"]]


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--skip-invalid", is_flag=True, help="Write the valid lines, report the others.")
@click.option(
    "--chunk",
    type=click.IntRange(min=1),
    help="Fact commands per transaction (default: SGAM_BATCH_SIZE).",
)
@json_output
def import_facts(file: Path, skip_invalid: bool, chunk: int | None, as_json: bool) -> None:
    """Write facts, one `put` command per line as a JSON object ('-' for stdin).

    Every line is checked against the catalogue before any is written; an invalid line writes
    nothing (exit 2) unless --skip-invalid. Prints a receipt per line with --json (line,
    outcome, fact_id and version, or error), else the lines that failed and a count per
    outcome. Exit 0 when every line was written or unchanged, 2 when one was invalid, else 3
    when the ledger refused one."""
    with opened_store() as store:
        valid, bad = _check_file(store, file)
        if bad and not skip_invalid:
            report_lines([(receipt.line, "line", receipt.error or "") for receipt in bad])
            raise click.exceptions.Exit(2)
        size = chunk if chunk is not None else store.settings.batch_size
        as_json = output.wants_json(as_json)
        printed: AbstractContextManager[Callable[[ImportReceipt], None] | None] = (
            output.json_array() if as_json else nullcontext(None)
        )
        with progress(len(valid), "facts") as bar, printed as print_receipt:
            written = _write(store, valid, size, bar.update)
            receipts = heapq.merge(written, bad, key=lambda r: r.line)
            counts, failed = _tally(receipts, print_receipt)
    if not as_json:  # after the progress bar has gone: the failed lines, then the counts
        _summarise(counts, failed)
    if failed:
        counts = Counter(receipt.outcome for receipt in failed)
        listed = ", ".join(f"{count} {outcome}" for outcome, count in counts.items())
        click.echo(
            f"sgam: {len(failed)} {output.plural(len(failed), 'line')} not written: {listed}",
            err=True,
        )
        # 2 (invalid) before 3 (refused): the file needs fixing before its conflicts matter.
        raise click.exceptions.Exit(min(exit_code(r.problem) for r in failed if r.problem))


def _check_file(store: Store, file: Path) -> tuple[ValidLines, list[ImportReceipt]]:
    """The whole file checked at one instant: (line, command) for the valid lines, a receipt
    for each invalid one."""
    from pipeline.errors import InvalidInput
    from pipeline.ledger.imports import checked_command, invalid_line

    now = store.clock()
    valid: ValidLines = []
    bad: list[ImportReceipt] = []
    for number, data, problem in each_object(file):
        try:
            if data is None:
                raise InvalidInput("line", str(problem))
            valid.append((number, checked_command(data, store.catalog, store.settings, now)))
        except InvalidInput as error:
            bad.append(invalid_line(number, error))
    return valid, bad


def _write(
    store: Store, valid: ValidLines, size: int, advance: Callable[[int], None]
) -> Iterator[ImportReceipt]:
    """Receipts as each chunk is written, so they print while the rest waits."""
    from pipeline.ledger.batch import put_many
    from pipeline.ledger.imports import receipt

    for start in range(0, len(valid), size):
        part = valid[start : start + size]
        outcomes = put_many(store, [command for _, command in part], chunk=size)
        yield from (receipt(line, o) for (line, _), o in zip(part, outcomes, strict=True))
        advance(len(part))


def _tally(
    receipts: Iterable[ImportReceipt], print_receipt: Callable[[ImportReceipt], None] | None
) -> tuple[Counter[str], list[ImportReceipt]]:
    """Count the outcomes, keep the receipts of the lines not written, and with
    `print_receipt` (--json) print every receipt as soon as it is known."""
    counts: Counter[str] = Counter()
    failed: list[ImportReceipt] = []
    for receipt in receipts:
        counts[receipt.outcome] += 1
        if receipt.problem is not None:
            failed.append(receipt)
        if print_receipt is not None:
            print_receipt(receipt)
    return counts, failed


def _summarise(counts: Counter[str], failed: list[ImportReceipt]) -> None:
    from pipeline.ledger.imports import OUTCOMES

    for receipt in failed:
        click.echo(f"line {receipt.line}: {receipt.outcome}  {receipt.error}")
    total = sum(counts.values())
    listed = ", ".join(f"{counts[outcome]} {outcome}" for outcome in OUTCOMES if counts[outcome])
    click.echo(f"{total} {output.plural(total, 'line')}: {listed or 'nothing to import'}")
