"""The resource reader's description: bounded whatever a server lists, templates first."""

from mcp.types import Resource, ResourceTemplate

from app.mcp.convert import MAX_DESCRIPTION_CHARS, build_catalogue
from app.mcp.resources import READ_RESOURCE, ResourceListing, reader_tool


def notes(count: int) -> tuple[Resource, ...]:
    return tuple(Resource(uri=f"note://{i}", name=f"note-{i}", description=f"Note {i}\nmore") for i in range(count))


def test_a_short_listing_is_shown_whole() -> None:
    template = ResourceTemplate(uri_template="book://{title}", name="book", description="A book by title")
    description = reader_tool("lib", ResourceListing(notes(2), (template,))).description or ""
    assert description.splitlines()[1:] == [
        "URI templates (fill in the {variables}):", "- book://{title} (book): A book by title",
        "Resources:", "- note://0 (note-0): Note 0", "- note://1 (note-1): Note 1",
    ]


def test_a_long_listing_is_cut_with_a_count_of_the_rest() -> None:
    description = reader_tool("lib", ResourceListing(notes(1000), more=True)).description or ""
    shown = description.count("\n- note://")
    assert len(description) <= MAX_DESCRIPTION_CHARS and 5 < shown < 1000
    assert description.endswith(f"...and {1000 - shown}+ more: call with list: true to see them.")


def test_long_names_are_cut_to_a_line() -> None:
    long = Resource(uri="doc://" + "x" * 300, name="x", description="y" * 300)
    line = (reader_tool("lib", ResourceListing((long,))).description or "").splitlines()[-1]
    assert len(line) == 110 and line.endswith("…")


def test_the_reader_is_routed_as_a_reader_and_named_like_a_tool() -> None:
    reader = reader_tool("lib", ResourceListing(notes(1)))
    catalogue = build_catalogue({"lib": [reader]}, readers={"lib"})
    assert catalogue.reader_of("lib") == "lib__read_resource"
    route = catalogue.route("lib__read_resource")
    assert route is not None and route.reads_resources and route.tool == READ_RESOURCE and route.safe_to_retry
    # A server's own tool of that name is its own: not routed as the gateway's reader.
    own = build_catalogue({"lib": [reader]})
    assert own.reader_of("lib") is None


def test_many_templates_leave_room_for_resources() -> None:
    templates = tuple(ResourceTemplate(uri_template=f"t{i}://{{id}}", name=f"t{i}", description="x" * 150)
                      for i in range(100))
    description = reader_tool("lib", ResourceListing(notes(50), templates)).description or ""
    assert len(description) <= MAX_DESCRIPTION_CHARS
    shown_templates = description.count("\n- t")
    assert 0 < shown_templates < 100 and f"...and {100 - shown_templates} more templates." in description
    shown_notes = description.count("\n- note://")
    assert shown_notes > 0 and f"...and {50 - shown_notes} more: call with list: true" in description
