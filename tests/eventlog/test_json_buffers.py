"""What the log keeps of an append costs memory by its size, not by the JSON encoder's buffer.

orjson (3.12 and later) returns its output in the buffer it wrote into, about 4 KiB however
short the JSON: a record that kept the `meta` bytes of its append as orjson returned them
held ~4 KiB each, in every record a reader, a view or the log's recent-commits window keeps.
"""

from __future__ import annotations

import gc
import tracemalloc

import orjson
import pytest

from eventlog import NO_STREAM, NewEvent, open_log
from eventlog._append import meta_bytes, right_sized

EVENTS = 200
# A record of a small event: the tuple, its decoded data, the meta bytes, its id and hash
# texts. Well under a kilobyte; an encoder's buffer kept per record is 4 KiB alone.
BUDGET_PER_EVENT = 1024


def traced_growth(work):
    """(what `work()` returned, the bytes it left allocated), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = work()
        gc.collect()
        return kept, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("how", ["append", "append_many", "append with meta", "NewEvent meta"])
def test_records_kept_from_appends_cost_their_size_not_an_encoder_buffer(tmp_path, how):
    with open_log(tmp_path / "log.db") as log:
        log.append("warm-up", [NewEvent("X", {"n": 0}, meta={"actor": "warm"})])

        def work():
            kept = []
            for i in range(EVENTS):
                stream = f"s-{i}"
                if how == "append":
                    kept += log.append(stream, [NewEvent("X", {"n": i})])
                elif how == "append_many":
                    kept += log.append_many(
                        [(stream, [NewEvent("X", {"n": i})], NO_STREAM, {"actor": f"a{i}"})]
                    )[0]
                elif how == "append with meta":
                    kept += log.append(stream, [NewEvent("X", {"n": i})], meta={"actor": f"run:{i}"})
                else:
                    kept += log.append(stream, [NewEvent("X", {"n": i}, meta={"actor": f"run:{i}"})])
            return kept

        kept, growth = traced_growth(work)
        assert len(kept) == EVENTS
        assert growth / EVENTS < BUDGET_PER_EVENT, f"{growth / EVENTS:.0f} bytes kept per event"


def test_right_sized_bytes_are_equal_and_small():
    raw = orjson.dumps({"actor": "run:x"})
    trimmed = right_sized(raw)
    assert trimmed == raw
    assert type(trimmed) is bytes
    assert meta_bytes({"actor": "run:x"}) == b'{"actor":"run:x"}'
    _, growth = traced_growth(lambda: [right_sized(orjson.dumps({"i": i})) for i in range(EVENTS)])
    assert growth / EVENTS < 256
