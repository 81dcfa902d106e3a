"""The status page's list of a key's background tasks (app/mcp/task_book.py), over the vault in memory."""

import pytest

from app.mcp import TaskBook


@pytest.mark.anyio
async def test_a_task_heard_of_again_keeps_its_place_and_each_key_has_its_own() -> None:
    book = TaskBook.in_memory()
    await book.note("alice", "s", "research", "first", "working", "Gathering")
    await book.note("alice", "s", "research", "second", "working", "Gathering")
    await book.note("alice", "s", "research", "first", "completed", "")
    listed = await book.of("alice")
    assert [(entry.task_id, entry.status) for entry in listed] == [("first", "completed"), ("second", "working")]
    assert listed[0].ended and not listed[1].ended and listed[0].started <= listed[1].started
    assert await book.of("bob") == []
    assert await book.find("bob", "s", "first") is None
