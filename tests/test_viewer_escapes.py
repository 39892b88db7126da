"""proton-view escapes what a terminal would act on in names (issue 40 item 9): a newline, a carriage
return or an escape sequence in a scope name prints as ``\\n``, ``\\r``, ``\\x1b``, one node a line."""

import pytest

import proton_core as proton
from proton_core import viewer
from proton_core.viewer.names import printable, shown

NASTY = ["two\nlines", "back\rover", "red\x1b[31mtext\x1b[0m", "bell\x07", "sep\u2028arator"]


def test_printable_escapes_control_characters_only():
    assert printable("plain name/with:punct@3 é") == "plain name/with:punct@3 é"
    assert printable("a\nb\rc\x1b[0m\t") == "a\\nb\\rc\\x1b[0m\\t"
    assert printable("sep\u2028") == "sep\\u2028"
    assert shown("\n" * 200).endswith("...") and "\n" not in shown("\n" * 200)


@pytest.fixture
def profile(tmp_path):
    proton.start(str(tmp_path / "esc\x1b[2J"))  # the profile's own name, shown on the root line
    for name in NASTY:
        with proton.scope(name, {"bytes": 1}):
            pass
    proton.finalize()
    return str(tmp_path / "esc\x1b[2J.hatchet")


@pytest.mark.parametrize("extra", [[], ["--full-names"], ["--print-sorted"], ["-l"]])
def test_tree_prints_one_line_per_node_with_names_escaped(profile, capsys, extra):
    assert viewer.main(["-m", "bytes"] + extra + [profile]) == 0
    out = capsys.readouterr().out
    for raw in ("\r", "\x1b", "\x07", "\u2028"):
        assert raw not in out, (raw, extra)
    if extra == ["-l"]:
        return
    lines = out.splitlines()
    sorted_too = extra == ["--print-sorted"]
    assert len(lines) > 2 + len(NASTY) if sorted_too else len(lines) == 2 + len(NASTY)  # header, ROOT, a line each
    tree = lines[: 2 + len(NASTY)]
    for name in NASTY:
        assert sum(printable(name) in line for line in tree) == 1, (name, tree)
    assert "esc\\x1b[2J" in tree[1]  # the root line's profile name
