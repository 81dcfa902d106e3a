"""A fifth door for the tests: plain text in, the answer as plain text out (`POST /test/chat`). It shows what adding a
door is: this sub-package, and a line in the list of doors (here the app factory's `doors`)."""
