"""The eval's own MCP server: a shop's help desk with fixed data, so every task has one right answer.

Its tools cover what the reference servers do not: a tool error the model must report honestly (an
unknown order or city), numeric limits the model may overstep and must fix from the gateway's
`invalid_arguments` hint (llama.cpp's grammars do not enforce `minimum`/`maximum`), and results that
lead to a second tool (an order's city, then its weather), and a question for the person: scheduling a
delivery asks which day (MCP 2026-07-28's `input_required`), so the gateway's pause for an answer is measured.
Run: `python -m bench.eval.helpdesk` (stdio).

The question's request state is sealed with a fixed key, not the SDK's per-process default: the answer comes
back in a later request, which may reach a new process of this server (a restarted gateway, another replica).
"""

from typing import Annotated, Literal

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from pydantic import BaseModel, Field

STATE_KEY = "toolbridge-eval-helpdesk-request-state-key-0123456789"

server = MCPServer("helpdesk", version="1.0.0", request_state_security=RequestStateSecurity(keys=[STATE_KEY]))

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
    return {"order_id": order_id.strip().upper(), **_order(order_id)}


def _order(order_id: str) -> dict[str, str]:
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        raise ToolError(f"No order has the id {order_id!r}.")
    return order


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


class DeliveryDay(BaseModel):
    day: Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"] = Field(title="Day")


def _which_day(order_id: str) -> Elicit[DeliveryDay]:
    order = _order(order_id)  # an unknown order is an error before anyone is asked
    return Elicit(f"Which day should {order['item']} (order {order_id.strip().upper()}) be delivered?", DeliveryDay)


@server.tool()
async def schedule_delivery(
    order_id: Annotated[str, Field(description="The order id")],
    day: Annotated[ElicitationResult[DeliveryDay], Resolve(_which_day)],
) -> str:
    """Schedule an order's delivery; asks the person which day."""
    order_id = order_id.strip().upper()
    if day.action != "accept":
        return f"Delivery of {order_id} not scheduled: the person chose {day.action}."
    return f"Delivery of {order_id} scheduled for {day.data.day}."


if __name__ == "__main__":
    server.run()
