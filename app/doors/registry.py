"""The front doors the gateway serves, in one list: app/main.py mounts each door's routes and answers every error in
the shape of the door that owns the request's path. The first answers for every path no door owns. A new door is a
sub-package of app/doors/ whose `routes` module makes its DOOR (app/doors/door.py), and a line here.

Not imported by the doors' own modules: a door's pure translation stays free of the HTTP layer its routes are."""

from app.doors.chat_completions.routes import DOOR as CHAT_COMPLETIONS
from app.doors.door import Door
from app.doors.messages.routes import DOOR as MESSAGES
from app.doors.ollama.routes import DOOR as OLLAMA
from app.doors.responses.routes import DOOR as RESPONSES

DOORS: tuple[Door, ...] = (CHAT_COMPLETIONS, RESPONSES, MESSAGES, OLLAMA)
