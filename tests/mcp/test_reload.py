"""What a reload of mcp.json changes (app/mcp/reload.py), by table."""

from pathlib import Path

import anyio
import pytest
import watchfiles.main

from app.mcp.config import HttpServerConfig, McpConfig, McpConfigError, StdioServerConfig
from app.mcp.reload import ConfigDiff, ConfigReloads, diff_configs, request_on_change

A = StdioServerConfig(command="a")
A_CHANGED = StdioServerConfig(command="a", args=["--verbose"])
A_ASKING = StdioServerConfig(command="a", confirm=["write_*"])  # its tools' asks_first come with a restart
B = HttpServerConfig(url="http://127.0.0.1:9/mcp")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({}, {"a": A}, ConfigDiff(stopping=[], starting=["a"], unchanged=0)),
        ({"a": A}, {}, ConfigDiff(stopping=["a"], starting=[], unchanged=0)),
        ({"a": A, "b": B}, {"a": A, "b": B}, ConfigDiff(stopping=[], starting=[], unchanged=2)),
        ({"a": A, "b": B}, {"a": A_CHANGED, "b": B}, ConfigDiff(stopping=["a"], starting=["a"], unchanged=1)),
        ({"a": A}, {"a": A_ASKING}, ConfigDiff(stopping=["a"], starting=["a"], unchanged=0)),
        ({"a": A}, {"b": B}, ConfigDiff(stopping=["a"], starting=["b"], unchanged=0)),
        ({"a": A}, {"c": A}, ConfigDiff(stopping=["a"], starting=["c"], unchanged=0)),  # a rename is a new server
    ],
    ids=["added", "removed", "unchanged", "changed", "confirm-changed", "replaced", "renamed"],
)
def test_a_reload_stops_what_went_or_changed_and_starts_what_came_or_changed(
    old: dict, new: dict, expected: ConfigDiff
) -> None:
    assert diff_configs(old, new) == expected


@pytest.mark.anyio
async def test_a_reload_that_fails_keeps_the_last_good_config_and_says_why_until_one_succeeds() -> None:
    good = McpConfig(path=Path("mcp.json"), found=True, servers={"a": A})
    results: list[McpConfig | McpConfigError] = [McpConfigError('mcp.json: unknown field "confim"'), good]
    applied: list[McpConfig] = []
    done = anyio.Event()

    def load() -> McpConfig:
        result = results.pop(0)
        if isinstance(result, McpConfigError):
            raise result
        return result

    async def apply(config: McpConfig) -> None:
        applied.append(config)
        done.set()

    reloads = ConfigReloads(load)
    async with anyio.create_task_group() as group:
        group.start_soon(reloads.run, apply)
        reloads.request()
        with anyio.fail_after(10):
            while reloads.problem is None:  # the failed file, read in a worker thread
                await anyio.sleep(0.01)
        assert reloads.problem == 'mcp.json: unknown field "confim"' and applied == []  # nothing changed
        reloads.request()
        with anyio.fail_after(10):
            await done.wait()
        assert applied == [good] and reloads.problem is None
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_watching_a_file_ends_as_soon_as_it_is_cancelled(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # watchfiles waits for changes in a thread that cancelling does not interrupt, 5 s each time on Linux: every
    # gateway watching mcp.json or its keys file took 5 s to stop. Here the wait is 90 s: only the stop event the
    # watch sets when it is cancelled ends it sooner, which the generous deadline below tells apart (without the
    # event the test fails with TimeoutError once the 90 s are up).
    monkeypatch.setattr(watchfiles.main, "_calc_async_timeout", lambda timeout: 90_000)
    watched = tmp_path / "mcp.json"
    watched.write_text("{}")
    reloads: list[str] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(request_on_change, [watched], lambda: reloads.append("reload"))
            await anyio.sleep(0.5)  # watching: its thread waits for a change
            watched.write_text('{"mcpServers": {}}')
            with anyio.fail_after(20):
                while not reloads:
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
    assert reloads == ["reload"]
