"""The one manifest reader (python/src/manifest_record.cpp) as _segrt binds
it: the op library's manifest and run-time compiled ones become typed
records; malformed text is a ValueError naming the problem, never a crash."""

from __future__ import annotations

import json

import pytest

from segops import _library

_SEGRT = _library.native_module()


def _manifest_text() -> str:
    return (_library.NATIVE_DIR / "manifest.json").read_text()


def test_library_records_match_the_manifest_text() -> None:
    data = json.loads(_manifest_text())
    records = _library.kernels()
    assert list(records) == [entry["name"] for entry in data["kernels"]]
    for entry in data["kernels"]:
        record = records[entry["name"]]
        assert record.dtype == entry["dtype"]
        assert [b.name for b in record.buffers] == [b["name"] for b in entry["buffers"]]
        assert [b.role for b in record.buffers] == [b["role"] for b in entry["buffers"]]
        assert [list(b.shape) for b in record.buffers] == [b["shape"] for b in entry["buffers"]]
        assert [b.saved_result for b in record.buffers] == [
            b.get("saved_result", -1) for b in entry["buffers"]]
        assert record.idx_position == [b["name"] for b in entry["buffers"]].index("idx")
        assert record.host_symbol == entry["host"]["symbol"]
        assert record.host_rows == (entry["host"]["range"] == "rows")
        assert (record.split is None) == ("split" not in entry["host"])
        assert record.block == entry["gpu"]["block"][0]
        long_segments = entry["gpu"].get("long_segments", {})
        assert record.tile_rows == long_segments.get("tile_rows", 0)
        assert record.super_tile_rows == long_segments.get("super_tile_rows", 0)
        assert json.loads(record.text) == entry
    assert [b.cpu for b in _library.manifest().host_builds] == [b["cpu"] for b in data["host"]]
    assert _library.manifest().ptx == data["ptx"]


def test_a_record_round_trips_through_its_text() -> None:
    record = _library.kernel("segmented_sum_f32_w3")
    again = _library.parse_kernel(record.text)
    assert again.name == record.name and again.text == record.text
    assert [b.shape for b in again.buffers] == [b.shape for b in record.buffers]


def test_saved_results_are_recorded_per_buffer() -> None:
    """rms_norm's first backward takes the forward's result (#0) between x
    and the cotangent; sum's takes none."""
    rms = _library.kernel("segmented_rms_norm_f32_w3_grad").buffers
    assert [b.saved_result for b in rms] == [-1, -1, 0, -1, -1]
    assert [b.name for b in rms][:2] == ["arg0", "idx"]
    summed = _library.kernel("segmented_sum_f32_w3_grad").buffers
    assert all(b.saved_result == -1 for b in summed)


def test_buffer_extents() -> None:
    buffers = _library.kernel("segmented_sum_f32_w3").buffers
    assert [b.extents(7, 2) for b in buffers] == [[7, 3], [7], [2, 3]]


def _with(change) -> str:
    """The library's manifest cut to one kernel, changed."""
    data = json.loads(_manifest_text())
    data["kernels"] = data["kernels"][:1]
    change(data)
    return json.dumps(data)


def test_the_cut_manifest_parses() -> None:
    assert list(_library.parse_manifest(_with(lambda d: None)).kernels) == \
        [next(iter(_library.kernels()))]


_MALFORMED = [
    ("not json", "malformed segops manifest"),
    ("[]", "not a version"),
    (_with(lambda d: d.update(version=1)), "not a version"),
    (_with(lambda d: d["kernels"][0].pop("buffers")), "malformed segops manifest"),
    (_with(lambda d: d["kernels"][0]["buffers"][0].update(dtype="f16")),
     "unknown kernel dtype f16"),
    (_with(lambda d: d["kernels"][0]["buffers"][0].update(shape=["Q"])), "bad buffer extent"),
    (_with(lambda d: d["kernels"][0]["buffers"].pop(1)), "no single idx buffer"),
    (_with(lambda d: d["kernels"][0]["host"].update(sums_rows_of=9)), "names buffer 9"),
    (_with(lambda d: d["kernels"][0]["gpu"]["grid"].update(max=0)), "max 0 below min 1"),
    (_with(lambda d: d["kernels"][0]["gpu"]["grid"].update(max_from_mean_segment_rows=-1)),
     "negative max_from_mean_segment_rows"),
    (_with(lambda d: d["kernels"][0]["gpu"].update(entry="gpu_nothing")),
     "unknown kernel entry point gpu_nothing"),
]


@pytest.mark.parametrize("text, message", _MALFORMED, ids=[m for _, m in _MALFORMED])
def test_malformed_manifests_are_value_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _library.parse_manifest(text)


def test_a_missing_manifest_is_a_runtime_error(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="is missing"):
        _SEGRT.read_manifest(str(tmp_path / "manifest.json"))


def test_a_compiled_kernel_rejects_a_malformed_record() -> None:
    native = pytest.importorskip("segops.ops").native_kernels()
    if native is None:
        pytest.skip("no operator library")
    with pytest.raises(ValueError, match="malformed segops manifest"):
        native.CompiledKernel("{}", {})
