"""bench.compare's arithmetic on given samples: the figures issue 47 states its goals in (beside the floor relay,
beyond a tool round's parts), what `--json` writes, and the drift printed against a release."""

import argparse
import json

from bench.compare import drift, summary


def _samples(ms: float) -> list[list[float]]:
    """Three rounds whose medians are `ms`, with an outlier each that the medians must not see."""
    return [[ms, ms, ms + 50.0]] * 3


def _figures() -> dict[str, object]:
    latency = {}
    for name, json_ms, ttft in (("direct", 0.4, 0.7), ("floor", 0.6, 0.9), ("toolbridge+mcp", 1.0, 1.2)):
        latency |= {f"{name}|json": _samples(json_ms), f"{name}|stream50|ttft": _samples(ttft),
                    f"{name}|stream2000|total": _samples(20.0), f"{name}|stream10000|total": _samples(80.0)}
    latency |= {"toolbridge+mcp|tool": _samples(4.5), "parts": _samples(2.0), "parts|turn1": _samples(0.5),
                "parts|mcp": _samples(1.0), "parts|turn2": _samples(0.5)}
    rps = {"direct c=16": 20000.0, "direct c=64": 20000.0, "floor c=16": 8000.0, "floor c=64": 10000.0,
           "toolbridge+mcp c=16": 3000.0, "toolbridge+mcp c=64": 2500.0}
    return {"latency": latency, "rps": rps, "rss_idle_mb": {"floor": 42.0, "toolbridge+mcp": 120.0},
            "load": [0.2, 0.9], "commit": "abc1234"}


def test_the_summary_puts_toolbridge_beside_the_floor_and_the_round_beside_its_parts() -> None:
    args = argparse.Namespace(rounds=3, log_level="warning")
    facts = summary(_figures(), ["direct", "floor", "toolbridge+mcp"], args)
    ours = facts["arms"]["toolbridge+mcp"]
    assert round(ours["added_p50_ms"], 6) == 0.6
    assert round(ours["added_p50_x_floor"], 6) == 3.0  # 0.6 ms added against the floor's 0.2
    assert (ours["tool_round_beyond_parts_ms"], ours["tool_round_beyond_x_parts"]) == (2.5, 1.25)
    assert (ours["rps_c64_x_floor"], ours["rps_c64_x_c16"]) == (0.25, 2500 / 3000)
    assert ours["rss_idle_mb"] == 120.0 and "rss_idle_mb" not in facts["arms"]["direct"]
    assert "added_p50_ms" not in facts["arms"]["direct"] and "tool_round_ms" not in facts["arms"]["floor"]
    assert (facts["commit"], facts["parts_ms"]["mcp"], facts["load"]) == ("abc1234", 1.0, [0.2, 0.9])
    json.dumps(facts)  # what --json writes


def test_the_drift_against_a_release_gives_each_figure_its_change() -> None:
    args = argparse.Namespace(rounds=3, log_level="warning")
    before = summary(_figures(), ["direct", "floor", "toolbridge+mcp"], args)
    faster = _figures()
    faster["latency"]["toolbridge+mcp|tool"] = _samples(3.0)  # type: ignore[index]
    lines = drift(before, summary(faster, ["direct", "floor", "toolbridge+mcp"], args)).splitlines()
    beyond = next(line for line in lines if "tool_round_beyond_parts_ms" in line)
    assert beyond.split()[-4:] == ["2.50", "->", "1.00", "-60%"]
    assert next(line for line in lines if "rss_idle_mb" in line).endswith("+0%")
    assert not any("unlike runs" in line for line in lines)


def test_the_drift_says_when_the_release_was_measured_at_another_log_level() -> None:
    release = summary(_figures(), ["direct", "floor", "toolbridge+mcp"], argparse.Namespace(rounds=3, log_level="x"))
    del release["log_level"]  # the files up to 0.1.0 do not say: they were measured at warning
    now = summary(_figures(), ["direct", "floor", "toolbridge+mcp"], argparse.Namespace(rounds=3, log_level="info"))
    assert "(unlike runs: toolbridge logged at warning then, at info now)" in drift(release, now)


def test_each_release_keeps_its_figures_and_the_drift_can_be_read_against_them() -> None:
    """docs/benchmarks/VERSION.json, written by `bench.compare --json` on a quiet machine: the version being made has
    its file, and each file holds every figure the drift compares (the tool round only with an MCP server)."""
    import tomllib
    from pathlib import Path

    from bench.compare import DRIFT_FIGURES

    root = Path(__file__).parent.parent
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    releases = {path.stem: json.loads(path.read_text()) for path in (root / "docs" / "benchmarks").glob("*.json")}
    assert version in releases, f"docs/benchmarks/{version}.json: run bench.compare --quick --json on a quiet machine"
    for name, figures in releases.items():
        assert figures["version"] == name and figures["load"][0] < 1.0, name  # measured quiet, as the file says
        assert set(DRIFT_FIGURES) <= figures["arms"]["toolbridge+mcp"].keys(), name
        assert {f for f in DRIFT_FIGURES if "tool_round" not in f} <= figures["arms"]["toolbridge"].keys(), name
        assert "tool_round_beyond_x_parts" in drift(figures, figures)
