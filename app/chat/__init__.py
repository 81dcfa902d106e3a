"""The chat request's wing: from a parsed body to the events of its answer, and what the HTTP layer and the doors
use of it. Its face is this module's `__all__` (import-linter keeps the rest of the app to it):

- `service.py`: the one call a route makes (`answer_chat`), and the reply it gets back.
- `ports.py`: the Protocols the service and the loop are written against; `loop_options.py`: what a request makes of
  the loop; `slash_commands.py`: `/name` commands; `clients.py`: what particular clients wrap around a message, and
  Open WebUI's headers; `events.py`: what the loop tells the answer.
- `offer/`: what the model is offered (toolsets, the tool budget, tool discovery, the servers a chat waits for).
- `memory/`: earlier turns' calls and results given back to the model.
- `asking/`: what the person is asked (a yes for a call, a server's question) and their reply read.
- `loop/`: the tool loop itself.
- `answer/`: the loop's events as the answer the person sees (trace, shown results, images, streaming).
"""

from app.chat.answer import (
    CUT_OFF_MESSAGE,
    IMAGES_ROUTE,
    SHUTTING_DOWN,
    AnswerPart,
    CallsDone,
    ChatPayload,
    Delta,
    Ended,
    ImageStore,
    Payload,
    PersonView,
    ShutdownCutoff,
    StoredImage,
    answer_parts,
    chat_cut_off,
)
from app.chat.asking import Grant
from app.chat.clients import OPENWEBUI_PREFIX, openwebui_fields
from app.chat.loop_options import known_context, tool_budget_for

# Under another name: `loop_options` here would hide the module of that name (app.chat.loop_options).
from app.chat.loop_options import loop_options as request_loop_options
from app.chat.memory import GrantBook, MemoryStores, digest, memory_owner
from app.chat.offer import (
    TOOLS_HEADER,
    ToolListing,
    choose_tools,
    describe_offer,
    describe_request,
    prepare_ranking,
    ranked,
    with_virtual_models,
)
from app.chat.ports import RequestStats, SignInWaits, ToolOutput
from app.chat.service import ChatNeeds, ChatPool, ChatReply, answer_chat
from app.chat.turn import Caller, Turn

__all__ = [
    "CUT_OFF_MESSAGE", "IMAGES_ROUTE", "OPENWEBUI_PREFIX", "SHUTTING_DOWN", "TOOLS_HEADER", "AnswerPart", "Caller",
    "CallsDone", "ChatNeeds", "ChatPayload", "ChatPool", "ChatReply", "Delta", "Ended", "Grant", "GrantBook",
    "ImageStore", "MemoryStores", "Payload", "PersonView", "RequestStats", "ShutdownCutoff", "SignInWaits",
    "StoredImage", "ToolListing", "ToolOutput", "Turn", "answer_chat", "answer_parts", "chat_cut_off", "choose_tools",
    "describe_offer", "describe_request", "digest", "known_context", "memory_owner", "openwebui_fields",
    "prepare_ranking", "ranked", "request_loop_options", "tool_budget_for", "with_virtual_models",
]
