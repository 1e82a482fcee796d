"""telemetry.py in-process: counting once per item, the setting, percentiles, the health rule,
and the file that several sessions add up in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infill_engine.percentiles import nearest_rank as percentile
from lsp_server.cli import main as cli_main
from lsp_server.options import parse_options
from lsp_server.protocol import telemetry
from lsp_server.protocol.telemetry import Counts, Stats, bucket_percentile, item_id, read_file


def as_sent(key: str | None) -> dict[str, object]:
    """An item as an editor sends it back in didShowCompletion."""
    return {"insertText": "x", "command": {"command": "dllm.accepted", "arguments": [{"id": key}]}}


def test_each_item_is_counted_once_per_kind() -> None:
    s = Stats()
    a, b = s.issue("python"), s.issue("python")
    assert a and b and a != b
    assert s.shown(a) and not s.shown(a)  # a repeated report counts nothing
    assert s.accepted(a) and not s.accepted(a)
    assert s.partially_accepted(b, 4) and not s.partially_accepted(b, 9)
    assert not s.partially_accepted(b, 2)
    c = s.session["python"]
    assert (c.items, c.shown, c.accepted, c.partial, c.partial_chars) == (2, 2, 1, 1, 9)
    assert s.summary()["languages"]["python"]["acceptance_rate"] == 0.5


def test_accepted_without_a_show_report_counts_as_shown() -> None:
    s = Stats()
    key = s.issue("rust")
    assert s.accepted(key)
    assert s.session["rust"].shown == 1 and s.session["rust"].accepted == 1


def test_unknown_and_malformed_ids_count_nothing() -> None:
    s = Stats()
    s.issue("python")
    for key in (None, "nope", "x" * 65):
        assert not s.shown(key) and not s.accepted(key) and not s.partially_accepted(key, 3)
    assert s.session["python"].shown == 0
    assert item_id(as_sent("abc")) == "abc"
    bad: object
    for bad in (None, [], {"command": "dllm.accepted"}, {"command": {"arguments": "ab"}}):
        assert item_id(bad) is None


def test_counting_off_hands_out_no_ids_and_ignores_reports() -> None:
    s = Stats()
    key = s.issue("python")
    s.configure(enabled=False, slow_ms=2000)
    assert s.issue("python") is None
    assert not s.shown(key) and not s.accepted(key)
    s.request("python", 10.0, ok=True)
    assert s.session["python"].requests == 0
    assert s.summary()["enabled"] is False
    assert s.health()["recent_requests"] == 1  # the backend's health is kept either way


def test_percentiles_per_language() -> None:
    s = Stats()
    for ms in range(1, 101):
        s.request("python", float(ms), ok=True)
    s.request("go", 7.0, ok=False)
    py = s.summary()["languages"]["python"]
    assert (py["requests"], py["p50_ms"], py["p95_ms"]) == (100, 50.0, 95.0)
    go = s.summary()["languages"]["go"]
    assert (go["requests"], go["errors"], go["p50_ms"]) == (1, 1, None)
    assert percentile([], 50) is None and percentile([3.0], 95) == 3.0
    hist = [0] * (len(telemetry.BUCKETS_MS) + 1)
    hist[telemetry.bucket_of(420)] = 3
    hist[telemetry.bucket_of(20)] = 1
    assert bucket_percentile(hist, 50) == 500.0 and bucket_percentile(hist, 25) == 25.0


def test_health_idle_ok_slow_failing() -> None:
    s = Stats(slow_ms=300)
    assert s.health()["state"] == "idle"
    for _ in range(3):
        s.request("python", 100.0, ok=True)
    assert s.health()["state"] == "ok"
    for _ in range(4):
        s.request("python", 900.0, ok=True)
    h = s.health()
    assert h["state"] == "slow" and h["recent_p50_ms"] == 900.0
    for _ in range(7):
        s.request("python", 5.0, ok=False)
    assert s.health()["state"] == "failing"  # 7 of 14
    for _ in range(telemetry.RECENT):
        s.request("python", 100.0, ok=True)
    assert s.health()["state"] == "ok"  # only the recent window counts


def test_sessions_add_up_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "stats.json"
    for _ in range(2):
        s = Stats(path)
        key = s.issue("python")
        s.request("python", 420.0, ok=True)
        s.accepted(key)
        s.flush()
        s.flush()  # nothing new: nothing added twice
    totals = read_file(path)
    c = totals["python"]
    assert (c.requests, c.items, c.shown, c.accepted) == (2, 2, 2, 2)
    assert c.summary()["p50_ms"] == 500.0


def test_counting_off_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    s = Stats(path)
    s.request("python", 10.0, ok=True)
    s.configure(enabled=False, slow_ms=2000)
    s.flush()
    assert not path.exists()


def test_a_damaged_file_is_read_as_empty_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    path.write_text("{not json")
    assert read_file(path) == {}
    path.write_text(json.dumps({"languages": {"python": {"shown": -3, "accepted": "2"}}}))
    assert read_file(path)["python"] == Counts()
    s = Stats(path)
    s.accepted(s.issue("python"))
    s.flush()
    assert read_file(path)["python"].accepted == 1


def test_the_stats_command_prints_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stats.json"
    s = Stats(path)
    for lang in ("python", "python", "go"):
        key = s.issue(lang)
        s.shown(key)
        s.request(lang, 120.0, ok=True)
    s.accepted(key)
    s.flush()
    assert cli_main(["stats", "--file", str(path), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["total"]["shown"] == 3 and body["total"]["accepted"] == 1
    assert body["languages"]["go"]["acceptance_rate"] == 1.0
    assert cli_main(["stats", "--file", str(path)]) == 0
    table = capsys.readouterr().out
    assert "python" in table and "100%" in table and "all" in table
    assert cli_main(["stats", "--file", str(tmp_path / "none.json")]) == 0
    assert "no completions counted yet" in capsys.readouterr().out


def test_the_settings() -> None:
    opts, errors = parse_options({"stats": {"enabled": False, "slowMs": 800}})
    assert errors == [] and opts.stats.enabled is False and opts.stats.slow_ms == 800.0
    opts, errors = parse_options({"stats.enabled": "no"})
    assert opts.stats.enabled is True and "stats.enabled" in errors[0]
