"""The counts the docs quote — nodes, traces, setups: deterministic numbers, never times — are
what today's code gives. scripts/docs_numbers.py writes each puzzle page's run between marker
comments with its counts; this reruns each puzzle with arguments that give the same counts in
seconds (fewer steps, smaller batches) and compares, and checks that the inline values of the
prose that are counts agree too. ENCORE_LONG_TESTS=1 adds puzzle 1's larger models."""

import importlib.util
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_numbers", ROOT / "scripts" / "docs_numbers.py")
dn = importlib.util.module_from_spec(_spec)
sys.modules["docs_numbers"] = dn  # its dataclasses look their module up
_spec.loader.exec_module(dn)

CHECKED = [s.id for s in dn.SPECS if s.quick and (s.id != "p1-large" or os.environ.get("ENCORE_LONG_TESTS"))]


@pytest.mark.parametrize("spec_id", CHECKED)
def test_documented_counts_are_todays(spec_id):
    spec = dn.BY_ID[spec_id]
    text = (ROOT / spec.page).read_text()
    documented = dn.documented_counts(text, spec_id)
    assert documented, f"{spec.page}: block {spec_id} quotes no counts (run scripts/docs_numbers.py --only {spec_id})"
    _, data = dn.run_python(spec, spec.quick)
    assert dn.counts_of(spec, data) == documented, (
        f"{spec.page}: the counts of block {spec_id} are not today's; run scripts/docs_numbers.py --only {spec_id}")
    # The prose's inline values that are counts (times may differ; they come from the same run).
    for m in dn.INLINE.finditer(text):
        spec_of, key, name, value = m.groups()
        if spec_of == spec_id and name in documented.get(key, {}):
            assert value == str(documented[key][name]), m.group(0)


def test_every_block_and_inline_value_has_a_spec():
    pages = {s.page for s in dn.SPECS}
    for page in pages:
        text = (ROOT / page).read_text()
        for m in dn.INLINE.finditer(text):
            assert m.group(1) in dn.BY_ID, f"{page}: inline value of unknown block {m.group(1)}"
            assert dn.read_block(text, m.group(1)) is not None, f"{page}: {m.group(0)} without its block"
        for s in dn.SPECS:
            if s.page == page:
                assert dn.read_block(text, s.id) is not None, f"{page}: no block {s.id}"
