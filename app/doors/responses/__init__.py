"""The Responses API's door (`/v1/responses`): the request read into a chat body (request.py, input.py), the answer
spelled as a response (answer.py, items.py), stored responses (store.py); its routes and DOOR in routes.py."""
