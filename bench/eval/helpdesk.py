"""The eval's own MCP server: a shop's help desk with fixed data, so every task has one right answer.

Its tools cover what the reference servers do not: a tool error the model must report honestly (an
unknown order or city), numeric limits the model may overstep and must fix from the gateway's
`invalid_arguments` hint (llama.cpp's grammars do not enforce `minimum`/`maximum`), and results that
lead to a second tool (an order's city, then its weather). Run: `python -m bench.eval.helpdesk` (stdio).
"""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

server = MCPServer("helpdesk", version="1.0.0")

ORDERS = {
    "A-1001": {"status": "shipped", "arrives": "November 28", "city": "Oslo", "item": "a red kettle"},
    "A-1002": {"status": "packing", "arrives": "December 3", "city": "Tokyo", "item": "two lamps"},
    "A-1003": {"status": "delivered", "arrives": "November 20", "city": "Cairo", "item": "a blue chair"},
}
WEATHER = {
    "oslo": ("Oslo", -3, "snow"),
    "paris": ("Paris", 14, "light rain"),
    "cairo": ("Cairo", 31, "sunshine"),
    "tokyo": ("Tokyo", 9, "clear skies"),
}
PRODUCTS = ["kettle", "lamp", "chair", "table", "mug", "teapot", "rug", "clock", "vase", "shelf", "desk",
            "stool", "mirror", "blanket", "pillow", "candle", "basket", "bowl", "plate", "spoon"]


@server.tool()
def lookup_order(order_id: Annotated[str, Field(description="The order id, such as A-1001")]) -> dict:
    """Look up an order by its id: its status, the item, the delivery city and when it arrives."""
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"No order has the id {order_id!r}.")
    return {"order_id": order_id.strip().upper(), **order}


def _weather(city: str, missing: str) -> tuple[str, int, str]:
    found = WEATHER.get(city.strip().lower())
    if found is None:
        raise ToolError(f"There is no {missing} for {city!r}.")
    return found


@server.tool()
def get_weather(city: Annotated[str, Field(description="The city's name, such as Paris")]) -> str:
    """The weather right now in a city."""
    name, degrees, sky = _weather(city, "weather data")
    return f"{name}: {degrees} °C and {sky}."


@server.tool()
def get_forecast(
    city: Annotated[str, Field(description="The city's name")],
    days: Annotated[int, Field(ge=1, le=7, description="How many days ahead, 1 to 7")],
) -> str:
    """The weather forecast for a city, up to 7 days ahead."""
    name, degrees, sky = _weather(city, "forecast")
    return f"{name}, next {days} days: around {degrees} °C with {sky}, then clearing."


@server.tool()
def search_products(
    query: Annotated[str, Field(description="Words to search for")],
    limit: Annotated[int, Field(ge=1, le=10, description="How many results, at most 10")],
) -> list[str]:
    """Search the shop's products by name; returns up to `limit` names."""
    words = query.lower().split()
    found = [p for p in PRODUCTS if any(w.rstrip("s") in p for w in words)] or PRODUCTS
    return found[:limit]


if __name__ == "__main__":
    server.run()
