"""The status page's list of a key's background tasks (app/mcp/task_book.py), over the vault in memory."""

import pytest

from app.mcp import TaskBook, TaskEntry
from app.mcp.pool import McpPool
from app.state import StateStoreError
from tests.mcp.test_pool import config, options


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


@pytest.mark.anyio
async def test_news_unchanged_is_not_written_and_updated_says_when_it_last_changed() -> None:
    book = TaskBook.in_memory()
    book.clock = iter([100.0, 200.0, 300.0]).__next__
    await book.note("alice", "s", "research", "t", "working", "Reading")
    await book.note("alice", "s", "research", "t", "working", "Reading")  # asked again at 200: nothing new
    [entry] = await book.of("alice")
    assert (entry.started, entry.updated) == (100.0, 100.0)
    await book.note("alice", "s", "research", "t", "working", "Writing")
    [entry] = await book.of("alice")
    assert (entry.message, entry.updated) == ("Writing", 300.0)


@pytest.mark.anyio
async def test_a_task_is_due_again_once_its_poll_interval_passed_and_never_held_once_ended() -> None:
    book = TaskBook.in_memory()
    await book.note("alice", "s", "research", "t", "working", "")
    [entry] = await book.of("alice")
    assert book.due("alice", entry)  # never asked
    book.asked("alice", "s", "t", "working", 3600.0)
    assert not book.due("alice", entry) and book.due("bob", entry)  # each key's own
    book.asked("alice", "s", "t", "working", 0.0)  # the server no longer asks for a pause
    assert book.due("alice", entry)
    book.asked("alice", "s", "t", "working", 3600.0)
    book.asked("alice", "s", "t", "completed", 3600.0)
    assert book.due("alice", entry)


@pytest.mark.anyio
async def test_a_servers_pollinterval_is_honoured_up_to_a_minute() -> None:
    book, now = TaskBook.in_memory(), [1000.0]
    book.monotonic = lambda: now[0]
    await book.note("alice", "s", "research", "t", "working", "")
    [entry] = await book.of("alice")
    book.asked("alice", "s", "t", "working", 86_400.0)  # a day
    now[0] += 59
    assert not book.due("alice", entry)
    now[0] += 1
    assert book.due("alice", entry)


class UnreadableBook(TaskBook):
    async def of(self, owner: str) -> list[TaskEntry]:
        raise StateStoreError("the store is down")


@pytest.mark.anyio
async def test_a_store_that_cannot_be_read_is_raised_as_itself_for_the_page_to_say_so() -> None:
    """The status page answers a StateStoreError with a 503; an error group from the asking would be a 500."""
    book = UnreadableBook.in_memory()
    pool = McpPool(config(), options(task_book=book))
    with pytest.raises(StateStoreError):
        await pool.tasks_now("alice")
