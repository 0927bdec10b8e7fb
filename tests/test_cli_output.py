"""The one table renderer both apps print every table with (gpuadvisor.cli.output)."""

from __future__ import annotations

from rich import box
from rich.console import Console

from gpuadvisor.cli.output import emit_table, render_table

ROWS = [{"name": "resnet50-on-a-long-instance-name", "n": 3, "x": 0.123456, "text": "12.5"},
        {"name": "b", "n": None, "x": 1234.5, "text": "7"}]


def lines(table, width: int) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(table)
    return console.export_text().splitlines()


def test_numbers_are_right_justified_unless_told_which_columns():
    inferred = render_table(ROWS, ["name", "n", "x", "text"])
    assert [c.justify for c in inferred.columns] == ["left", "right", "right", "left"]
    told = render_table(ROWS, ["name", "text"], right=["text"], headers={"text": "value"})
    assert [(c.header, c.justify) for c in told.columns] == [("name", "left"), ("value", "right")]


def test_cells_are_formatted_once_for_every_table():
    text = "\n".join(lines(render_table(ROWS, ["n", "x"]), 80))
    assert "0.123" in text and "1,234" in text and "-" in text  # None is a dash


def test_wrapped_cells_fold_without_losing_characters_and_unwrapped_stay_on_one_line():
    folded = lines(render_table(ROWS, ["name"]), 20)
    assert "resnet50-on-a-long-instance-name" in "".join(line.strip("│ ") for line in folded)
    one_line = lines(render_table(ROWS, ["name", "n"], wrap=False), 20)
    assert sum("resnet50" in line for line in one_line) == 1


def test_compact_tables_have_no_frame_and_can_style_rows():
    table = render_table(ROWS, ["name", "n"], compact=True, row_styles=["bold", None])
    assert table.box is box.SIMPLE_HEAD and not table.pad_edge
    assert table.rows[0].style == "bold" and table.rows[1].style is None


def test_a_piped_table_that_never_wraps_gets_160_columns(capsys):
    emit_table([{"name": "x" * 120, "n": 1}], ["name", "n"], wrap=False)
    assert "x" * 120 in capsys.readouterr().out
