"""What the model is offered: the tools its user chose (toolsets), the tool budget and what it withholds, tool
discovery (`find_tools`), what fits the model's context, and the servers whose tools a chat waits for or lacks (still
starting, waiting for a sign-in). Its face: the names below."""

from app.chat.offer.context_budget import CHARS_PER_TOKEN, fit_restored, prompt_allowance
from app.chat.offer.missing_servers import NotReady, ServerStarts, await_starting, sign_in_notes
from app.chat.offer.ranker_import import ranked
from app.chat.offer.tool_budget import Budget, all_fit, budget_for, choose_in_conversation, choose_within
from app.chat.offer.tool_discovery import find_tools_offer, offer_found
from app.chat.offer.tool_offer import ToolListing, describe_offer, describe_request, why_withheld
from app.chat.offer.tool_ranking import kept_ranking, prepare_ranking, ranking_of
from app.chat.offer.toolsets import HEADER as TOOLS_HEADER
from app.chat.offer.toolsets import Chosen, choose_tools, with_virtual_models

__all__ = [
    "CHARS_PER_TOKEN", "TOOLS_HEADER", "Budget", "Chosen", "NotReady", "ServerStarts", "ToolListing", "all_fit",
    "await_starting", "budget_for", "choose_in_conversation", "choose_tools", "choose_within", "describe_offer",
    "describe_request", "find_tools_offer", "fit_restored", "kept_ranking", "offer_found", "prepare_ranking",
    "prompt_allowance", "ranked", "ranking_of", "sign_in_notes", "why_withheld", "with_virtual_models",
]
